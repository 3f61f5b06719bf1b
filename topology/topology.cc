#include "topology/topology.h"

#include <algorithm>
#include <cstddef>

namespace kolo {

std::string_view LinkClassName(LinkClass c) {
  switch (c) {
    case LinkClass::kSelf: return "X";
    case LinkClass::kNVLink: return "NV";
    case LinkClass::kPix: return "PIX";
    case LinkClass::kPxb: return "PXB";
    case LinkClass::kPhb: return "PHB";
    case LinkClass::kNode: return "NODE";
    case LinkClass::kSys: return "SYS";
    case LinkClass::kShm: return "SHM";
    case LinkClass::kNet: return "NET";
    case LinkClass::kUnknown: return "?";
  }
  return "?";
}

std::string_view NicKindName(NicKind k) {
  switch (k) {
    case NicKind::kInfiniBand: return "InfiniBand";
    case NicKind::kRoCE: return "RoCE";
    case NicKind::kEthernet: return "Ethernet";
    case NicKind::kEfa: return "EFA";
    case NicKind::kOther: return "other";
  }
  return "other";
}

LinkClass PciLink(const PciPlace& a, const PciPlace& b) {
  if (a.bus_id == b.bus_id && !a.bus_id.empty()) return LinkClass::kSelf;
  if (a.bridges.empty() || b.bridges.empty()) {
    if (a.package >= 0 && a.package == b.package) return LinkClass::kNode;
    return a.package < 0 && b.package < 0 ? LinkClass::kNode : LinkClass::kSys;
  }
  if (a.bridges.front() != b.bridges.front()) {
    // Different host bridges: the way crosses the CPU, inside one package or between two.
    if (a.package == b.package) return LinkClass::kNode;
    return LinkClass::kSys;
  }
  size_t common = 0;
  while (common < a.bridges.size() && common < b.bridges.size() &&
         a.bridges[common] == b.bridges[common]) {
    ++common;
  }
  // Only the host bridge in common: up to the root complex and down again.
  if (common == 1) return LinkClass::kPhb;
  // Below one PCI bridge: a switch's upstream port with each device on one of its downstream
  // ports (or both directly on it, e.g. functions of one card) is one switch (PIX); more
  // levels on either side mean several switches (PXB).
  const size_t below_a = a.bridges.size() - common;
  const size_t below_b = b.bridges.size() - common;
  return below_a <= 1 && below_b <= 1 ? LinkClass::kPix : LinkClass::kPxb;
}

double Topology::NvlinkGbps(int a, int b) const {
  if (a < 0 || b < 0 || a >= static_cast<int>(nvlink_gbps.size()) ||
      b >= static_cast<int>(nvlink_gbps[a].size())) {
    return 0;
  }
  return nvlink_gbps[a][b];
}

LinkClass Topology::GpuLink(int a, int b) const {
  if (a == b) return LinkClass::kSelf;
  const bool counted = !nvlink_links.empty() && a < static_cast<int>(nvlink_links.size()) &&
                       b < static_cast<int>(nvlink_links[a].size());
  if (NvlinkGbps(a, b) > 0 && (!counted || nvlink_links[a][b] > 0)) return LinkClass::kNVLink;
  return PciLink(gpus[a].pci, gpus[b].pci);
}

LinkClass Topology::GpuNicLink(int g, int n) const { return PciLink(gpus[g].pci, nics[n].pci); }

int Topology::ClosestNic(int g) const {
  // RDMA before plain Ethernet, then the nearest by PCI class, then the lowest index: GPU
  // traffic leaves through an RDMA NIC wherever the node has one (NCCL's IB/RoCE transport,
  // UCX), even one across the CPU, and falls back to sockets only without.
  int best = -1;
  for (int n = 0; n < static_cast<int>(nics.size()); ++n) {
    if (best < 0) {
      best = n;
      continue;
    }
    const bool rn = IsRdma(nics[n].kind), rb = IsRdma(nics[best].kind);
    if (rn != rb) {
      if (rn) best = n;
      continue;
    }
    if (GpuNicLink(g, n) < GpuNicLink(g, best)) best = n;
  }
  return best;
}

int Topology::ClosestNicToPackage(int p) const {
  int best = -1;
  auto score = [&](int n) {
    // Lower is better: RDMA before plain Ethernet (MPI's RDMA transports), then on the package.
    return (IsRdma(nics[n].kind) ? 0 : 2) + (nics[n].pci.package == p ? 0 : 1);
  };
  for (int n = 0; n < static_cast<int>(nics.size()); ++n) {
    if (best < 0 || score(n) < score(best)) best = n;
  }
  return best;
}

std::vector<int> Topology::ClosestGpus(int n) const {
  std::vector<int> out;
  LinkClass best = LinkClass::kUnknown;
  for (int g = 0; g < static_cast<int>(gpus.size()); ++g) {
    const LinkClass c = GpuNicLink(g, n);
    if (c < best) {
      best = c;
      out.clear();
    }
    if (c == best) out.push_back(g);
  }
  return out;
}

}  // namespace kolo
