// One walk of hwloc's tree for both live machines and XML exports. hwloc 2.x puts PCI objects
// in the I/O children of the CPU-side object they hang from (a Package, a NUMA node's parent
// Group, or the Machine); bridges chain down from a host bridge (upstream type HOST) through
// root ports and switch ports (PCI-PCI); OS devices (cuda0, nvml0, ib0, mlx5_0) are I/O
// children of their PCI device. NVLink comes as the "NVLinkBandwidth" distance matrix (MB/s)
// between GPU OS devices, NVSwitch PCI devices and (on POWER) packages.
#include "topology/hwloc_topology.h"

#include <hwloc.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "topology/link_defaults.h"
#include "topology/nvml_links.h"

namespace kolo {

namespace {

constexpr double kMaxNvlinkGbps = 10000;
using PciAttr = hwloc_obj_attr_u::hwloc_pcidev_attr_s;

class HwlocTopology {
 public:
  HwlocTopology() = default;
  ~HwlocTopology() {
    if (t_ != nullptr) hwloc_topology_destroy(t_);
  }
  HwlocTopology(const HwlocTopology&) = delete;
  HwlocTopology& operator=(const HwlocTopology&) = delete;
  hwloc_topology_t* ptr() { return &t_; }
  hwloc_topology_t get() const { return t_; }

 private:
  hwloc_topology_t t_ = nullptr;
};

std::string FormatBusId(const PciAttr& p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", static_cast<unsigned>(p.domain),
                static_cast<unsigned>(p.bus), static_cast<unsigned>(p.dev),
                static_cast<unsigned>(p.func));
  return buf;
}

std::string Info(hwloc_obj_t obj, const char* name) {
  const char* v = hwloc_obj_get_info_by_name(obj, name);
  return v != nullptr ? v : "";
}

bool IsGpu(const PciAttr& p) {
  const bool display = (p.class_id >> 8) == 0x03;
  return display && (p.vendor_id == kPciVendorNvidia || p.vendor_id == kPciVendorAmd);
}

bool IsNetwork(const PciAttr& p) { return (p.class_id >> 8) == 0x02; }

bool IsNvswitch(hwloc_obj_t obj) {
  if (obj->type != HWLOC_OBJ_PCI_DEVICE) return false;
  if (obj->subtype != nullptr && std::strcmp(obj->subtype, "NVSwitch") == 0) return true;
  return obj->attr->pcidev.vendor_id == kPciVendorNvidia && obj->attr->pcidev.class_id == 0x0680;
}

// A switch's upstream port: a PCI-PCI bridge with two or more bridges (its downstream ports)
// below it. Root ports hang from a host bridge and have one secondary bus, so they do not count.
bool IsSwitchUpstreamPort(hwloc_obj_t obj) {
  if (obj->type != HWLOC_OBJ_BRIDGE || obj->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_PCI) {
    return false;
  }
  int bridges = 0;
  for (hwloc_obj_t c = obj->io_first_child; c != nullptr; c = c->next_sibling) {
    if (c->type == HWLOC_OBJ_BRIDGE) ++bridges;
  }
  return bridges >= 2;
}

// What the tree walk keeps besides the Topology: each device's nearest switch.
struct SwitchRef {
  uint64_t gp_index = 0;
  std::string bus_id;
  int package = -1;
  bool present = false;
};

class Walker {
 public:
  Walker(hwloc_topology_t t, bool live) : t_(t), live_(live) {}

  Topology Run(std::string source) {
    Topology topo;
    topo.source = std::move(source);
    topo.hostname = Info(hwloc_get_root_obj(t_), "HostName");
    ReadCpus(topo);
    ReadPci(topo);
    ReadNvlink(topo);
    return topo;
  }

 private:
  void ReadCpus(Topology& topo) {
    topo.cores = hwloc_get_nbobjs_by_type(t_, HWLOC_OBJ_CORE);
    topo.pus = hwloc_get_nbobjs_by_type(t_, HWLOC_OBJ_PU);
    const int packages = hwloc_get_nbobjs_by_type(t_, HWLOC_OBJ_PACKAGE);
    for (int i = 0; i < packages; ++i) {
      hwloc_obj_t p = hwloc_get_obj_by_type(t_, HWLOC_OBJ_PACKAGE, i);
      Package pkg;
      pkg.os_index = static_cast<int>(p->os_index);
      pkg.cpu_model = Info(p, "CPUModel");
      pkg.cpu_vendor = Info(p, "CPUVendor");
      pkg.cores = hwloc_get_nbobjs_inside_cpuset_by_type(t_, p->cpuset, HWLOC_OBJ_CORE);
      pkg.pus = hwloc_get_nbobjs_inside_cpuset_by_type(t_, p->cpuset, HWLOC_OBJ_PU);
      pkg.l3_bytes = CacheInside(p->cpuset);
      topo.packages.push_back(std::move(pkg));
    }
    if (topo.packages.empty()) {
      // Some VMs and containers report no package; the machine then counts as one.
      Package pkg;
      pkg.os_index = 0;
      pkg.cores = topo.cores;
      pkg.pus = topo.pus;
      pkg.l3_bytes = CacheInside(hwloc_get_root_obj(t_)->cpuset);
      topo.packages.push_back(std::move(pkg));
      synthetic_package_ = true;
      topo.notes.push_back("hwloc reports no package; the machine is counted as one");
    }
    const int numa = hwloc_get_nbobjs_by_type(t_, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < numa; ++i) {
      hwloc_obj_t n = hwloc_get_obj_by_type(t_, HWLOC_OBJ_NUMANODE, i);
      NumaNode node;
      node.os_index = static_cast<int>(n->os_index);
      node.package = PackageIndex(n);
      node.bytes = n->attr != nullptr ? n->attr->numanode.local_memory : 0;
      topo.numa_nodes.push_back(node);
    }
  }

  uint64_t CacheInside(hwloc_const_cpuset_t set) const {
    for (hwloc_obj_type_t type : {HWLOC_OBJ_L3CACHE, HWLOC_OBJ_L2CACHE}) {
      uint64_t total = 0;
      const int n = hwloc_get_nbobjs_inside_cpuset_by_type(t_, set, type);
      for (int i = 0; i < n; ++i) {
        total += hwloc_get_obj_inside_cpuset_by_type(t_, set, type, i)->attr->cache.size;
      }
      if (total > 0) return total;
    }
    return 0;
  }

  int PackageIndex(hwloc_obj_t obj) const {
    if (synthetic_package_) return 0;
    for (hwloc_obj_t a = obj; a != nullptr; a = a->parent) {
      if (a->type == HWLOC_OBJ_PACKAGE) return static_cast<int>(a->logical_index);
    }
    // NUMA nodes and I/O may hang from a Group or the Machine: the package whose cpuset covers
    // the object's, if exactly one does.
    if (obj->cpuset != nullptr && !hwloc_bitmap_iszero(obj->cpuset)) {
      hwloc_obj_t p = hwloc_get_next_obj_covering_cpuset_by_type(t_, obj->cpuset,
                                                                   HWLOC_OBJ_PACKAGE, nullptr);
      if (p != nullptr) return static_cast<int>(p->logical_index);
    }
    return -1;
  }

  int NumaIndex(hwloc_obj_t cpu_side) const {
    if (cpu_side->nodeset == nullptr || hwloc_bitmap_weight(cpu_side->nodeset) != 1) return -1;
    const int os = hwloc_bitmap_first(cpu_side->nodeset);
    const int n = hwloc_get_nbobjs_by_type(t_, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < n; ++i) {
      if (static_cast<int>(hwloc_get_obj_by_type(t_, HWLOC_OBJ_NUMANODE, i)->os_index) == os) {
        return i;
      }
    }
    return -1;
  }

  PciPlace Place(hwloc_obj_t dev, SwitchRef* sw) const {
    PciPlace place;
    const PciAttr& p = dev->attr->pcidev;
    place.bus_id = FormatBusId(p);
    place.vendor_id = p.vendor_id;
    place.device_id = p.device_id;
    place.class_id = p.class_id;
    place.link_gbps = p.linkspeed > 0 ? p.linkspeed : 0;
    for (hwloc_obj_t b = dev->parent; b != nullptr && b->type == HWLOC_OBJ_BRIDGE; b = b->parent) {
      place.bridges.push_back(b->gp_index);
      if (sw != nullptr && !sw->present && IsSwitchUpstreamPort(b)) {
        sw->present = true;
        sw->gp_index = b->gp_index;
        sw->bus_id = FormatBusId(b->attr->bridge.upstream.pci);
      }
    }
    // hwloc reports each end's current link speed, and idle links train down (an idle GPU's
    // link drops to Gen1; root ports of real exports show 2 GB/s above Gen3 x16 GPUs), so the
    // device's link counts at the faster of its two ends, and the uplinks above it are taken to
    // be as fast (switch uplinks are at least as wide as one device link on GPU servers).
    double fastest = place.link_gbps;
    hwloc_obj_t port = dev->parent;
    if (port != nullptr && port->type == HWLOC_OBJ_BRIDGE &&
        port->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI) {
      fastest = std::max(fastest, static_cast<double>(port->attr->bridge.upstream.pci.linkspeed));
    }
    place.path_gbps = fastest > 0 ? fastest : 0;
    std::reverse(place.bridges.begin(), place.bridges.end());
    hwloc_obj_t cpu_side = hwloc_get_non_io_ancestor_obj(t_, dev);
    if (cpu_side != nullptr) {
      place.package = PackageIndex(cpu_side);
      place.numa = NumaIndex(cpu_side);
    }
    if (sw != nullptr) sw->package = place.package;
    return place;
  }

  static void OsDevices(hwloc_obj_t dev, std::vector<std::string>* names, bool* openfabrics) {
    for (hwloc_obj_t c = dev->io_first_child; c != nullptr; c = c->next_sibling) {
      if (c->type != HWLOC_OBJ_OS_DEVICE || c->name == nullptr) continue;
      names->push_back(c->name);
      if (openfabrics != nullptr && c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) {
        *openfabrics = true;
      }
    }
  }

  // Per-port speed from sysfs: "200 Gb/sec (4X HDR)" for RDMA devices, Mbit/s for netdevs.
  static double SysfsSpeedGbit(const std::vector<std::string>& names) {
    for (const std::string& n : names) {
      std::ifstream rate("/sys/class/infiniband/" + n + "/ports/1/rate");
      double v = 0;
      if (rate >> v && v > 0) return v;
    }
    for (const std::string& n : names) {
      std::ifstream speed("/sys/class/net/" + n + "/speed");
      double v = 0;
      if (speed >> v && v > 0) return v / 1000.0;
    }
    return 0;
  }

  void ReadPci(Topology& topo) {
    std::vector<std::pair<Gpu, SwitchRef>> gpus;
    std::vector<std::pair<Nic, SwitchRef>> nics;
    for (hwloc_obj_t dev = hwloc_get_next_pcidev(t_, nullptr); dev != nullptr;
         dev = hwloc_get_next_pcidev(t_, dev)) {
      const PciAttr& p = dev->attr->pcidev;
      if (IsGpu(p)) {
        Gpu gpu;
        SwitchRef sw;
        gpu.pci = Place(dev, &sw);
        gpu.model = Info(dev, "GPUModel");
        for (hwloc_obj_t c = dev->io_first_child; c != nullptr && gpu.model.empty();
             c = c->next_sibling) {
          gpu.model = Info(c, "GPUModel");
        }
        OsDevices(dev, &gpu.os_devices, nullptr);
        gpu.nvlink_generation = NvlinkGeneration(p.vendor_id, p.device_id);
        gpus.emplace_back(std::move(gpu), sw);
      } else if (IsNetwork(p)) {
        Nic nic;
        SwitchRef sw;
        nic.pci = Place(dev, &sw);
        bool openfabrics = false;
        OsDevices(dev, &nic.names, &openfabrics);
        if (p.class_id == 0x0207) {
          nic.kind = NicKind::kInfiniBand;
        } else if (p.vendor_id == 0x1d0f && (p.device_id >> 8) == 0xef) {
          nic.kind = NicKind::kEfa;
        } else if (p.class_id == 0x0200) {
          nic.kind = openfabrics ? NicKind::kRoCE : NicKind::kEthernet;
        }
        if (live_) {
          nic.speed_gbit = SysfsSpeedGbit(nic.names);
          if (nic.speed_gbit > 0) nic.speed_source = "sysfs";
        }
        if (nic.speed_gbit <= 0) {
          nic.speed_gbit = NicSpeedFromPciIds(p.vendor_id, p.device_id);
          if (nic.speed_gbit > 0) nic.speed_source = "PCI id table";
        }
        nics.emplace_back(std::move(nic), sw);
      }
    }
    auto by_bus = [](const auto& a, const auto& b) { return a.first.pci.bus_id < b.first.pci.bus_id; };
    std::sort(gpus.begin(), gpus.end(), by_bus);
    std::sort(nics.begin(), nics.end(), by_bus);

    std::map<uint64_t, int> switch_of_gp;
    auto switch_index = [&](const SwitchRef& sw) {
      auto it = switch_of_gp.find(sw.gp_index);
      if (it != switch_of_gp.end()) return it->second;
      PcieSwitch s;
      s.bus_id = sw.bus_id;
      s.gp_index = sw.gp_index;
      s.package = sw.package;
      topo.switches.push_back(std::move(s));
      const int idx = static_cast<int>(topo.switches.size()) - 1;
      switch_of_gp.emplace(sw.gp_index, idx);
      return idx;
    };
    for (auto& [gpu, sw] : gpus) {
      if (sw.present) topo.switches[switch_index(sw)].gpus.push_back(topo.gpus.size());
      topo.gpus.push_back(std::move(gpu));
    }
    for (auto& [nic, sw] : nics) {
      if (sw.present) topo.switches[switch_index(sw)].nics.push_back(topo.nics.size());
      topo.nics.push_back(std::move(nic));
    }
    std::sort(topo.switches.begin(), topo.switches.end(),
              [](const PcieSwitch& a, const PcieSwitch& b) { return a.bus_id < b.bus_id; });

    auto note_speed = [&](const PciPlace& place, const char* what) {
      if (place.path_gbps > 0) return;
      topo.notes.push_back(std::string("PCI link speed unknown for ") + what + " " +
                           place.bus_id + ": PCIe Gen3 x16 (15.75 GB/s) assumed");
    };
    for (const Gpu& g : topo.gpus) note_speed(g.pci, "GPU");
    for (const Nic& n : topo.nics) {
      note_speed(n.pci, "NIC");
      if (n.speed_gbit <= 0) {
        topo.notes.push_back("speed unknown for NIC " + n.pci.bus_id +
                             ": 10 Gbit/s assumed");
      }
    }
  }

  // The GPU (index into the sorted topo.gpus) an object of an NVLinkBandwidth matrix stands
  // for: a GPU PCI device or one of its OS devices; -1 otherwise.
  static int GpuOf(const Topology& topo, hwloc_obj_t obj) {
    hwloc_obj_t pci = obj;
    if (obj->type == HWLOC_OBJ_OS_DEVICE) pci = obj->parent;
    if (pci == nullptr || pci->type != HWLOC_OBJ_PCI_DEVICE) return -1;
    const std::string bus = FormatBusId(pci->attr->pcidev);
    for (int g = 0; g < static_cast<int>(topo.gpus.size()); ++g) {
      if (topo.gpus[g].pci.bus_id == bus) return g;
    }
    return -1;
  }

  void ReadNvlink(Topology& topo) {
    const int n_gpus = static_cast<int>(topo.gpus.size());
    if (n_gpus == 0) return;
    unsigned nr = 0;
    if (hwloc_distances_get_by_name(t_, "NVLinkBandwidth", &nr, nullptr, 0) != 0 || nr == 0) {
      return;
    }
    std::vector<hwloc_distances_s*> mats(nr, nullptr);
    if (hwloc_distances_get_by_name(t_, "NVLinkBandwidth", &nr, mats.data(), 0) != 0) return;
    std::vector<std::vector<double>> direct(n_gpus, std::vector<double>(n_gpus, 0));
    int implausible = 0;
    // gp_index of each NVSwitch -> per-GPU bandwidth to it (GB/s).
    std::map<uint64_t, std::vector<double>> to_switch;
    for (unsigned m = 0; m < nr; ++m) {
      hwloc_distances_s* d = mats[m];
      const unsigned n = d->nbobjs;
      for (unsigned i = 0; i < n; ++i) {
        for (unsigned j = 0; j < n; ++j) {
          if (i == j) continue;
          const double gbps = static_cast<double>(d->values[i * n + j]) / 1000.0;
          if (gbps <= 0) continue;
          const int gi = GpuOf(topo, d->objs[i]);
          if (gi < 0) continue;
          // Less than half a link or more than any NVLink domain carries (NVLink 5: 18 x 50
          // GB/s per GPU; 10 TB/s leaves room) is not a link: a damaged matrix, said so.
          const double per_link = NvlinkRawGbpsPerLink(topo.gpus[gi].nvlink_generation);
          if (gbps < per_link / 2 || gbps > kMaxNvlinkGbps) {
            ++implausible;
            continue;
          }
          const int gj = GpuOf(topo, d->objs[j]);
          if (gj >= 0 && gj != gi) {
            direct[gi][gj] = std::max(direct[gi][gj], gbps);
          } else if (IsNvswitch(d->objs[j])) {
            auto& row = to_switch.try_emplace(d->objs[j]->gp_index, n_gpus, 0.0).first->second;
            row[gi] = std::max(row[gi], gbps);
          }
        }
      }
      hwloc_distances_release(t_, d);
    }
    if (implausible > 0) {
      topo.notes.push_back(std::to_string(implausible) +
                           " NVLinkBandwidth entries ignored: below half a link or above " +
                           std::to_string(static_cast<int>(kMaxNvlinkGbps)) + " GB/s");
    }
    topo.nvswitch = !to_switch.empty();
    topo.nvlink_gbps.assign(n_gpus, std::vector<double>(n_gpus, 0));
    topo.nvlink_links.assign(n_gpus, std::vector<int>(n_gpus, 0));
    bool any = false;
    for (int i = 0; i < n_gpus; ++i) {
      for (int j = 0; j < n_gpus; ++j) {
        if (i == j) continue;
        // NVSwitch fabrics are non-blocking all-to-all (DGX-2 joins its two baseboards' switches
        // with trunk links that hwloc does not list), so i reaches j at the lower of the two
        // GPUs' total bandwidth into the fabric.
        double total_i = 0, total_j = 0;
        for (const auto& [gp, row] : to_switch) {
          total_i += row[i];
          total_j += row[j];
        }
        const double via = std::min(total_i, total_j);
        const double bw = std::max(direct[i][j], direct[j][i]) + via;
        topo.nvlink_gbps[i][j] = bw;
        const double per_link = NvlinkRawGbpsPerLink(topo.gpus[i].nvlink_generation);
        topo.nvlink_links[i][j] = static_cast<int>(std::lround(bw / per_link));
        any = any || bw > 0;
      }
    }
    if (!any) {
      topo.nvlink_gbps.clear();
      topo.nvlink_links.clear();
    }
  }

  hwloc_topology_t t_;
  bool live_;
  bool synthetic_package_ = false;
};

// SXM GPUs are joined by NVLink; an export without NVLinkBandwidth (hwloc without NVML, or
// older than 2.5) shows them as PCIe peers. Say so, since the model then assumes PCIe.
void NoteMissingNvlink(Topology* topo) {
  if (!topo->nvlink_gbps.empty()) return;
  std::string ids;
  for (const Gpu& g : topo->gpus) {
    if (IsSxmGpu(g.pci.vendor_id, g.pci.device_id)) ids += (ids.empty() ? "" : ", ") + g.pci.bus_id;
  }
  if (ids.empty()) return;
  topo->notes.push_back("SXM GPUs (" + ids + ") have NVLink, but this topology has no "
                        "NVLinkBandwidth (hwloc without its NVML plugin): GPU pairs are taken "
                        "as PCIe");
}

Status PrepareFilters(hwloc_topology_t t) {
  // Every bridge is kept: switch ports are what group GPUs and NICs.
  if (hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_ALL) != 0) {
    return InternalError(std::string("hwloc_topology_set_io_types_filter: ") +
                         std::strerror(errno));
  }
  return Status::OK();
}


}  // namespace

StatusOr<Topology> DiscoverTopology() {
  HwlocTopology t;
  if (hwloc_topology_init(t.ptr()) != 0) {
    return InternalError(std::string("hwloc_topology_init: ") + std::strerror(errno));
  }
  KOLO_RETURN_IF_ERROR(PrepareFilters(t.get()));
  // The Linux backend reads the PCI tree (ids, classes, link speeds) from sysfs by itself; the
  // "pci" plugin (libpciaccess) would add nothing here but leaks its device list at every load
  // (~1 KiB, found by LeakSanitizer), once per kolo_init.
  hwloc_topology_set_components(t.get(), HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
  if (hwloc_topology_load(t.get()) != 0) {
    return InternalError(std::string("hwloc_topology_load (this machine): ") +
                         std::strerror(errno));
  }
  Topology topo = Walker(t.get(), /*live=*/true).Run("hwloc (this machine)");
  // hwloc without its NVML plugin sees no NVLink; the driver's NVML can (a no-op without one).
  FillNvlinkFromNvml(&topo);
  NoteMissingNvlink(&topo);
  return topo;
}

StatusOr<Topology> LoadTopologyXml(const std::string& path) {
  const std::string what = "hwloc XML '" + path + "'";
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return InvalidArgumentError(what + ": is a directory");
  }
  std::ifstream in(path);
  if (!in) return NotFoundError(what + ": cannot open: " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  const std::string body = text.str();
  const size_t root = body.find("<topology");
  if (root == std::string::npos) {
    if (body.find("<system") != std::string::npos) {
      return InvalidArgumentError(what + ": an NCCL topology file (NCCL_TOPO_FILE format), not "
                                  "an hwloc export; kolo reads `lstopo --of xml` output");
    }
    return InvalidArgumentError(what + ": not an hwloc topology export (no <topology> element)");
  }
  // hwloc 2.x drops every object after an XML comment inside the tree without an error
  // (tests/fixtures/topologies/README.md); lstopo never writes one, so refuse.
  if (body.find("<!--", root) != std::string::npos) {
    return InvalidArgumentError(what + ": contains XML comments inside <topology>, after which "
                                "hwloc 2.x silently drops objects; remove them (lstopo never "
                                "writes comments)");
  }
  const size_t version = body.find("version=\"", root);
  if (version != std::string::npos && version < body.find('>', root) &&
      body.compare(version + 9, 2, "3.") == 0) {
    return InvalidArgumentError(what + ": an hwloc 3.x export (XML version 3.0); this hwloc "
                                "reads versions 1.x and 2.x (export with hwloc 2: lstopo "
                                "--of xml, or hwloc 3's --export-xml-flags v2)");
  }
  HwlocTopology t;
  if (hwloc_topology_init(t.ptr()) != 0) {
    return InternalError(std::string("hwloc_topology_init: ") + std::strerror(errno));
  }
  KOLO_RETURN_IF_ERROR(PrepareFilters(t.get()));
  if (hwloc_topology_set_xmlbuffer(t.get(), body.data(), static_cast<int>(body.size() + 1)) != 0 ||
      hwloc_topology_load(t.get()) != 0) {
    return InvalidArgumentError(what + ": hwloc cannot parse it (malformed XML; hwloc's own "
                                "message, if any, is on stderr)");
  }
  Topology topo = Walker(t.get(), /*live=*/false).Run(path);
  NoteMissingNvlink(&topo);
  return topo;
}

StatusOr<Topology> LoadTopology(const std::string& xml_path) {
  if (!xml_path.empty()) return LoadTopologyXml(xml_path);
  return DiscoverTopology();
}

}  // namespace kolo
