#include "topology/link_model.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "topology/link_defaults.h"

namespace kolo {

namespace {

std::string Fmt(const char* format, double a, double b = 0, double c = 0) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), format, a, b, c);
  return buf;
}

double PcieRaw(const PciPlace& p) { return p.path_gbps > 0 ? p.path_gbps : kDefaultPcieRawGbps; }

const Package* PackageOf(const Topology& t, int p) {
  if (p >= 0 && p < static_cast<int>(t.packages.size())) return &t.packages[p];
  return t.packages.empty() ? nullptr : &t.packages.front();
}

double Interconnect(const Topology& t, int package) {
  const Package* p = PackageOf(t, package);
  return p ? InterconnectGbps(p->cpu_vendor, p->cpu_model) : InterconnectGbps("", "");
}

Link HostPair(const Topology& t, int pa, int pb) {
  Link l;
  if (pa == pb || t.packages.size() <= 1) {
    l.cls = LinkClass::kShm;
    l.gbps = kShmGbps;
    l.alpha_us = kShmAlphaUs;
    l.basis = "shared memory in one package (MPI shm transport, measured defaults)";
    return l;
  }
  const double ic = Interconnect(t, pa);
  l.cls = LinkClass::kSys;
  l.gbps = std::min(kShmGbps, ic);
  l.alpha_us = kShmAlphaUs + kCrossPackageExtraAlphaUs;
  l.basis = Fmt("shared memory across packages (interconnect %.0f GB/s)", ic);
  return l;
}

Link GpuPair(const Topology& t, int a, int b) {
  Link l;
  l.cls = t.GpuLink(a, b);
  if (l.cls == LinkClass::kSelf) {
    // Two ranks on one GPU: a device-local copy, far faster than any link.
    l.gbps = 1000;
    l.basis = "same GPU";
    return l;
  }
  if (l.cls == LinkClass::kNVLink) {
    const int gen = t.gpus[a].nvlink_generation;
    l.nvlinks = t.nvlink_links.empty() ? 0 : t.nvlink_links[a][b];
    l.gbps = l.nvlinks > 0 ? l.nvlinks * NvlinkAchievableGbpsPerLink(gen)
                           : t.NvlinkGbps(a, b) * NvlinkAchievableGbpsPerLink(gen) /
                                 NvlinkRawGbpsPerLink(gen);
    l.alpha_us = kNvlinkHopUs;
    // (The format had a stray %s that read a vararg never passed: undefined behaviour.)
    l.basis = Fmt("NVLink x%.0f (%.1f GB/s raw)", l.nvlinks, t.NvlinkGbps(a, b)) +
              (t.nvswitch ? " through NVSwitch" : "");
    return l;
  }
  const double raw = std::min(PcieRaw(t.gpus[a].pci), PcieRaw(t.gpus[b].pci));
  l.gbps = raw * kPcieEfficiency;
  l.alpha_us = kPcieHopUs;
  l.basis = Fmt("PCIe %.2f GB/s raw", raw);
  if (l.cls == LinkClass::kSys) {
    const double ic = Interconnect(t, t.gpus[a].pci.package);
    if (ic < l.gbps) l.gbps = ic;
    l.alpha_us = 2 * kPcieHopUs;
    l.basis += Fmt(", across packages (interconnect %.0f GB/s)", ic);
  }
  return l;
}

// A rank's NIC link before sharing: the port's achievable rate, or the default.
Link NicLink(const Topology& t, int nic) {
  Link l;
  l.cls = LinkClass::kNet;
  if (nic < 0) {
    l.gbps = kDefaultNicGbit / 8 * kNicEfficiency;
    l.alpha_us = NicAlphaUs(NicKind::kEthernet);
    l.basis = "no NIC found: 10 Gbit/s Ethernet assumed";
    return l;
  }
  const Nic& n = t.nics[nic];
  const double gbit = n.speed_gbit > 0 ? n.speed_gbit : kDefaultNicGbit;
  l.gbps = gbit / 8 * kNicEfficiency;
  l.alpha_us = NicAlphaUs(n.kind);
  l.basis = std::string(NicKindName(n.kind)) + " " + (n.names.empty() ? n.pci.bus_id : n.names[0]) +
            Fmt(" %.0f Gbit/s", gbit) +
            (n.speed_gbit > 0 ? " (" + n.speed_source + ")" : std::string(" (assumed)"));
  return l;
}

void KeepSlowest(Link* worst, const Link& l, bool* set) {
  if (!*set || l.gbps < worst->gbps || (l.gbps == worst->gbps && l.alpha_us > worst->alpha_us)) {
    *worst = l;
    *set = true;
  }
}

std::string Signature(const Topology& t, int ranks) {
  std::string s = std::to_string(ranks) + "|" + std::to_string(t.packages.size());
  for (const Gpu& g : t.gpus) s += "|g" + std::to_string(g.pci.device_id);
  for (const Nic& n : t.nics) s += "|n" + std::to_string(n.speed_gbit);
  return s;
}

}  // namespace

JobLayout JobLayout::Uniform(const Topology& topo, int nodes, int ranks_per_node) {
  JobLayout job;
  for (int n = 0; n < nodes; ++n) {
    job.nodes.push_back(topo);
    for (int l = 0; l < ranks_per_node; ++l) {
      job.node_of_rank.push_back(n);
      job.local_rank_of.push_back(l);
    }
  }
  return job;
}

StatusOr<LinkModel> BuildLinkModel(const JobLayout& job) {
  LinkModel m;
  const int ranks = job.ranks();
  if (static_cast<int>(job.local_rank_of.size()) != ranks) {
    return InvalidArgumentError("job layout: node_of_rank and local_rank_of differ in length");
  }
  // bound_package is read per rank below: one of another length was read out of bounds.
  if (!job.bound_package.empty() && static_cast<int>(job.bound_package.size()) != ranks) {
    return InvalidArgumentError("job layout: bound_package has " +
                                std::to_string(job.bound_package.size()) + " entries for " +
                                std::to_string(ranks) + " ranks");
  }
  m.nodes.resize(job.nodes.size());
  m.ranks.resize(ranks);
  for (int r = 0; r < ranks; ++r) {
    const int node = job.node_of_rank[r];
    if (node < 0 || node >= static_cast<int>(job.nodes.size())) {
      return InvalidArgumentError("job layout: rank " + std::to_string(r) + " is on node " +
                                  std::to_string(node) + ", which has no topology");
    }
    // A package the node lacks would be taken for package 0's interconnect and NICs silently.
    const int bound = job.bound_package.empty() ? -1 : job.bound_package[r];
    const int packages = std::max(1, static_cast<int>(job.nodes[node].packages.size()));
    if (bound >= packages) {
      return InvalidArgumentError("job layout: rank " + std::to_string(r) +
                                  " is bound to package " + std::to_string(bound) + " of node " +
                                  std::to_string(node) + ", which has " + std::to_string(packages));
    }
    m.nodes[node].ranks.push_back(r);
  }
  for (NodeLinks& n : m.nodes) {
    std::sort(n.ranks.begin(), n.ranks.end(),
              [&](int a, int b) { return job.local_rank_of[a] < job.local_rank_of[b]; });
  }
  m.multi_node = job.nodes.size() > 1 && !job.simulated_nodes;
  m.gpus = !job.nodes.empty();
  bool host_set = false, device_set = false, nic_host_set = false, nic_device_set = false;
  std::set<std::string> signatures;
  m.cache_bytes = 0;
  for (size_t ni = 0; ni < job.nodes.size(); ++ni) {
    const Topology& t = job.nodes[ni];
    NodeLinks& nl = m.nodes[ni];
    const int local = static_cast<int>(nl.ranks.size());
    const int packages = std::max<int>(1, static_cast<int>(t.packages.size()));
    const int gpus = static_cast<int>(t.gpus.size());
    m.gpus = m.gpus && gpus > 0;
    signatures.insert(Signature(t, local));
    double l3 = 0;
    for (const Package& p : t.packages) l3 += static_cast<double>(p.l3_bytes);
    if (l3 > 0 && (m.cache_bytes == 0 || l3 < m.cache_bytes)) m.cache_bytes = l3;
    for (int l = 0; l < local; ++l) {
      const int r = nl.ranks[l];
      RankPlace& p = m.ranks[r];
      p.node = static_cast<int>(ni);
      p.local_rank = l;
      const int bound = job.bound_package.empty() ? -1 : job.bound_package[r];
      p.package = bound >= 0 ? bound : static_cast<int>(static_cast<long>(l) * packages / local);
      if (gpus > 0) {
        p.gpu = l % gpus;
        p.nic = t.ClosestNic(p.gpu);
        // An unbound GPU rank is taken to run next to its GPU (what binding tools and NCCL's
        // own CPU affinity do), not where block placement would put it.
        if (bound < 0 && t.gpus[p.gpu].pci.package >= 0) p.package = t.gpus[p.gpu].pci.package;
      } else {
        p.nic = t.ClosestNicToPackage(p.package);
      }
    }
    // NIC sharing: ranks that picked the same NIC divide it.
    std::map<int, int> sharers;
    for (int r : nl.ranks) ++sharers[m.ranks[r].nic];
    nl.host.assign(local, std::vector<Link>(local));
    if (gpus > 0) nl.device.assign(local, std::vector<Link>(local));
    for (int a = 0; a < local; ++a) {
      const RankPlace& pa = m.ranks[nl.ranks[a]];
      for (int b = 0; b < local; ++b) {
        const RankPlace& pb = m.ranks[nl.ranks[b]];
        if (a == b) {
          nl.host[a][b].cls = LinkClass::kSelf;
          if (gpus > 0) nl.device[a][b].cls = LinkClass::kSelf;
          continue;
        }
        nl.host[a][b] = HostPair(t, pa.package, pb.package);
        KeepSlowest(&m.intra_host, nl.host[a][b], &host_set);
        if (gpus > 0) {
          nl.device[a][b] = GpuPair(t, pa.gpu, pb.gpu);
          KeepSlowest(&m.intra_device, nl.device[a][b], &device_set);
        }
      }
      Link nic = NicLink(t, pa.nic);
      const int share = sharers[pa.nic];
      m.nic_sharers = std::max(m.nic_sharers, share);
      if (share > 1) {
        nic.gbps /= share;
        nic.basis += ", shared by " + std::to_string(share) + " ranks";
      }
      nl.nic_host.push_back(nic);
      KeepSlowest(&m.inter_host, nic, &nic_host_set);
      if (gpus > 0) {
        Link dev = nic;
        const double pcie = PcieRaw(t.gpus[pa.gpu].pci) * kPcieEfficiency;
        // No GPUDirect RDMA across the CPU, nor through a NIC without RDMA (TCP over plain
        // Ethernet, however close): the data is staged through host memory. (The RDMA test
        // was missing, so a GPU next to a plain Ethernet port counted as GPUDirect.)
        if (pa.nic >= 0 && !IsRdma(t.nics[pa.nic].kind)) {
          dev.basis += ", staged through host memory (NIC without RDMA)";
          dev.alpha_us += kPcieHopUs;
        } else if (pa.nic >= 0 && t.GpuNicLink(pa.gpu, pa.nic) >= LinkClass::kNode) {
          dev.basis += ", staged through host memory (NIC not near the GPU)";
          dev.alpha_us += kPcieHopUs;
        }
        if (pcie < dev.gbps) dev.gbps = pcie;
        nl.nic_device.push_back(dev);
        KeepSlowest(&m.inter_device, dev, &nic_device_set);
      }
    }
    for (const std::string& note : t.notes) m.notes.push_back(note);
  }
  if (!host_set) m.intra_host = HostPair(Topology(), 0, 0);
  if (!device_set && m.gpus) m.intra_device = GpuPair(job.nodes[0], 0, 0);
  m.homogeneous = signatures.size() <= 1;
  if (job.simulated_nodes) {
    m.notes.push_back("nodes simulated by KOLO_NODE_GROUPING on one machine: the inter-node "
                      "link keeps the cost model's default");
  }
  return m;
}

}  // namespace kolo
