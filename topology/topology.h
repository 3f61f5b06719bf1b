// What one node looks like, as hwloc reports it: packages (sockets), NUMA nodes and cores; the
// GPUs and NICs with their place in the PCI tree; PCIe switches; the NVLink bandwidth between
// GPUs. A plain value: built by topology/hwloc_topology.h from the live machine or from an hwloc
// XML export (the same code path), serialised to JSON (topology/topology_json.h) so every rank
// learns every node's, and read by topology/link_model.h. Knows nothing of ranks or tensors.
//
// Units: bandwidths in GB/s (10^9 bytes per second, one direction), NIC speeds in Gbit/s as
// vendors quote them, cache sizes in bytes.
#ifndef KOLO_TOPOLOGY_TOPOLOGY_H_
#define KOLO_TOPOLOGY_TOPOLOGY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kolo {

// How two devices of one node reach each other, best first; the PCI names follow
// `nvidia-smi topo -m` (and NCCL's PATH_* levels).
enum class LinkClass : int {
  kSelf = 0,   // the same device
  kNVLink,     // direct NVLink (or through NVSwitches)
  kPix,        // PCIe through at most one switch (both below the same switch)
  kPxb,        // PCIe through several switches, without the host bridge
  kPhb,        // PCIe through one host bridge (the CPU's root complex)
  kNode,       // PCIe across host bridges of one NUMA node / package
  kSys,        // across packages (QPI/UPI, Infinity Fabric, X-Bus)
  kShm,        // host memory of one package (two CPU ranks on the same socket)
  kNet,        // through a NIC, between nodes
  kUnknown,    // a device outside the PCI tree hwloc saw
};
std::string_view LinkClassName(LinkClass c);  // "NV", "PIX", "PXB", "PHB", "NODE", "SYS", ...

// A PCI device's place in the tree: the bridges from its host bridge down to its parent
// (hwloc's persistent gp_index of each), and the slowest PCIe link on that way.
struct PciPlace {
  std::string bus_id;                 // "0000:1b:00.0"
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
  uint16_t class_id = 0;              // 0x0302 3D controller, 0x0207 InfiniBand, 0x0200 Ethernet
  std::vector<uint64_t> bridges;      // host bridge first; empty when not under a host bridge
  int package = -1;                   // index into Topology::packages, -1 when attached higher
  int numa = -1;                      // index into Topology::numa_nodes, -1 when unknown
  // GB/s of the device's own link (link_gbps) and of its way to the host bridge (path_gbps:
  // the faster end of its link, see hwloc_topology.cc);
  // 0 where hwloc reported none (the link model then uses its default and says so).
  double link_gbps = 0;
  double path_gbps = 0;
};

struct Package {
  int os_index = -1;
  std::string cpu_model;              // hwloc's CPUModel info ("" when absent)
  std::string cpu_vendor;             // CPUVendor ("GenuineIntel", "AuthenticAMD", ...)
  int cores = 0;
  int pus = 0;
  uint64_t l3_bytes = 0;              // total last-level cache of the package
};

struct NumaNode {
  int os_index = -1;
  int package = -1;
  uint64_t bytes = 0;
};

struct PcieSwitch {
  std::string bus_id;                 // upstream port
  uint64_t gp_index = 0;              // hwloc's id of the upstream port bridge
  int package = -1;
  std::vector<int> gpus;              // indices into Topology::gpus below this switch
  std::vector<int> nics;              // indices into Topology::nics below this switch
};

struct Gpu {
  PciPlace pci;
  std::string model;                  // GPUModel info, else "" (vendor/device ids still known)
  std::vector<std::string> os_devices;  // "cuda0", "nvml0", "card1", ... as hwloc named them
  int nvlink_generation = 0;          // 0 unknown; from the device id (topology/link_defaults.h)
};

enum class NicKind : int { kInfiniBand, kRoCE, kEthernet, kEfa, kOther };
std::string_view NicKindName(NicKind k);
// InfiniBand, RoCE and EFA move data by RDMA; Ethernet and unknown NICs through sockets.
inline bool IsRdma(NicKind k) { return k != NicKind::kEthernet && k != NicKind::kOther; }

struct Nic {
  PciPlace pci;
  NicKind kind = NicKind::kOther;
  std::vector<std::string> names;     // net and OpenFabrics OS device names ("ib0", "mlx5_0")
  double speed_gbit = 0;              // per port; 0 when unknown
  std::string speed_source;           // "sysfs", "PCI id table", "" (unknown)
};

struct Topology {
  std::string source;                 // "hwloc (this machine)" or the XML file's path
  std::string hostname;               // HostName info when the export has one
  std::vector<Package> packages;
  std::vector<NumaNode> numa_nodes;
  int cores = 0;
  int pus = 0;
  std::vector<Gpu> gpus;              // in PCI bus id order: the order CUDA enumerates by
                                      // default with CUDA_DEVICE_ORDER=PCI_BUS_ID
  std::vector<Nic> nics;              // in PCI bus id order
  std::vector<PcieSwitch> switches;   // switches that hold at least one GPU or NIC
  // GPU x GPU NVLink bandwidth (GB/s, one direction) as hwloc's NVLinkBandwidth gives it, or
  // derived through NVSwitches: the lower of the two GPUs' total bandwidth into the switch
  // fabric, which is all-to-all (hwloc_topology.cc; a sum over switches of min(bw(i,s),
  // bw(j,s)) would give 0 between DGX-2 baseboards, whose GPUs reach disjoint switches); empty
  // when hwloc reported no NVLink. nvlink_links[i][j] is that bandwidth in links of the GPU's
  // generation; nvswitch says the links go through switches.
  std::vector<std::vector<double>> nvlink_gbps;
  std::vector<std::vector<int>> nvlink_links;
  bool nvswitch = false;
  // What the loader assumed or could not read ("PCI link speed missing for 0000:3b:00.0"),
  // printed by kolo-topo so a default is never silent.
  std::vector<std::string> notes;

  double NvlinkGbps(int a, int b) const;
  // The class of the way from GPU a to GPU b.
  LinkClass GpuLink(int a, int b) const;
  // The class of the way between GPU g and NIC n.
  LinkClass GpuNicLink(int g, int n) const;
  // The NIC GPU g sends through: RDMA-capable first (IB, RoCE, EFA), then the best PCI class,
  // then the lowest index; -1 when the node has no NIC.
  int ClosestNic(int g) const;
  // The NIC a CPU rank on package p sends through: RDMA first, then one under that package;
  // -1 when none.
  int ClosestNicToPackage(int p) const;
  // GPUs closest to NIC n (every GPU at the best class).
  std::vector<int> ClosestGpus(int n) const;
};

// The class of the way between two PCI places of one node.
LinkClass PciLink(const PciPlace& a, const PciPlace& b);

}  // namespace kolo

#endif  // KOLO_TOPOLOGY_TOPOLOGY_H_
