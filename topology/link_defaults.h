// The numbers the link model uses where the machine does not say, each with its source. Raw
// rates are datasheet figures (what hwloc and the vendors report); achievable rates are what a
// collective library reaches over the link, taken from NCCL's own topology model
// (src/graph/topo.h: *_NVLINK_BW, PCI_BW, QPI/AMD/P9 interconnect, NET_BW, in GB/s) where NCCL
// has one, so kolo's predictions and NCCL's rank links alike. All GB/s are one direction.
// A calibration file (KOLO_TUNING_FILE, `kolo-bench --calibrate`) overrides every figure the
// cost model takes from here.
#ifndef KOLO_TOPOLOGY_LINK_DEFAULTS_H_
#define KOLO_TOPOLOGY_LINK_DEFAULTS_H_

#include <cstdint>
#include <string_view>

#include "topology/topology.h"

namespace kolo {

// PCI vendor ids (the PCI-SIG's list).
constexpr uint16_t kPciVendorNvidia = 0x10de;
constexpr uint16_t kPciVendorAmd = 0x1002;

// NVLink generation of an NVIDIA GPU from its PCI device id, by architecture (device id ranges
// of NVIDIA's PCI id list): 1 Pascal P100 (0x15xx), 2 Volta V100 (0x1dxx), 3 Ampere A100
// (0x20xx), 4 Hopper H100/H200 (0x23xx), 5 Blackwell B100/B200 (0x29xx); 0 = unknown or none.
int NvlinkGeneration(uint16_t vendor_id, uint16_t device_id);

// NVIDIA GPUs sold only as SXM/OAM modules, whose links between GPUs are NVLink by design:
// P100 SXM2 (15f9), V100 SXM2/SXM3 (1db1, 1db5, 1db8), A100 SXM4 (20b0, 20b2), H100 SXM5
// (2330), H200 SXM (2335), B200 (2901). Used to warn when an export shows them without NVLink.
bool IsSxmGpu(uint16_t vendor_id, uint16_t device_id);

// Datasheet rate of one link, GB/s per direction: NVLink 1.0 20, 2.0 25, 3.0 25, 4.0 25,
// 5.0 50 (P100: 4 links 80 GB/s; V100: 6 links 150; A100: 12 links 300; H100: 18 links 450;
// B200: 18 links 900). hwloc's NVLinkBandwidth reports the same per-link figures (in MB/s),
// so a matrix entry divided by this is the number of links. Unknown generation: 25.
double NvlinkRawGbpsPerLink(int generation);

// Achievable per link (NCCL's SM60/SM70/SM80/SM90/SM100_NVLINK_BW: 18, 20, 20, 20.6, 40).
double NvlinkAchievableGbpsPerLink(int generation);

// PCIe: when hwloc reports no link speed (0 or absent), Gen3 x16 (15.75 GB/s raw) is assumed
// and the topology says so. Achievable = raw x 12/15.75 (NCCL's PCI_BW of 12 GB/s for a Gen3
// x16 link, i.e. the share left after TLP overheads).
constexpr double kDefaultPcieRawGbps = 15.753846;
constexpr double kPcieEfficiency = 12.0 / 15.753846;

// Between packages (the SMP interconnect), achievable, by CPU vendor string: Intel 10
// (NCCL's SKL_QPI_BW), AMD 16 (AMD_BW), IBM POWER 32 (P9_BW), other 6 (QPI_BW, the oldest and
// lowest, so an unknown CPU is not flattered).
double InterconnectGbps(std::string_view cpu_vendor, std::string_view cpu_model);

// Host point-to-point between two ranks of one node through shared memory (MPI's
// shared-memory transport, one core copying): 1.0 us and 5 GB/s as measured on this project's
// reference machine (docs/machine-notes.md, the same figures as CostModel's defaults).
// Across packages the copy also crosses the interconnect: the lower of the two rates, and
// +0.5 us for the remote cache-line transfers of the flags (a cross-socket cache-to-cache
// transfer is ~100-150 ns against ~40 ns inside a package, and a message takes a few).
constexpr double kShmAlphaUs = 1.0;
constexpr double kShmGbps = 5.0;
constexpr double kCrossPackageExtraAlphaUs = 0.5;

// GPU to GPU hop latency (NCCL's hwLat for the LL protocol of a ring step: NVLink ~0.5 us,
// PCIe ~1 us) and the fixed start of an NCCL kernel (NCCL's baseLat, ~6.6 us for a ring).
constexpr double kNvlinkHopUs = 0.5;
constexpr double kPcieHopUs = 1.0;
constexpr double kNcclLaunchUs = 6.6;

// NIC port speed in Gbit/s from its PCI ids (the vendors' product briefs): Mellanox/NVIDIA
// ConnectX-4 (15b3:1013) 100, ConnectX-4 Lx (1015) 25, ConnectX-5 (1017) 100, ConnectX-5 Ex
// (1019) 100, ConnectX-6 (101b) 200, ConnectX-6 Dx (101d) 100, ConnectX-6 Lx (101f) 25,
// ConnectX-7 (1021) 400, BlueField-2 (a2d6) 100; AWS EFA (1d0f:efa0/efa1) 100, ENA (1d0f:ec20)
// 25; Intel E810 (8086:1592/1593) 100, X710 (8086:1572) 10, XXV710 (158b) 25, I350 (1521) 1;
// 0 when unknown.
double NicSpeedFromPciIds(uint16_t vendor_id, uint16_t device_id);
// Unknown NIC speed: 10 Gbit/s Ethernet, the most common floor, and the topology says so.
constexpr double kDefaultNicGbit = 10.0;
// Achievable share of the line rate (NCCL's NET_BW: 12 GB/s for a 100 Gbit/s port).
constexpr double kNicEfficiency = 12.0 / 12.5;
// One message's start-up between nodes (typical osu_latency figures): InfiniBand and RoCE
// ~2 us, EFA ~15 us (SRD), kernel TCP over Ethernet ~20 us.
double NicAlphaUs(NicKind kind);

}  // namespace kolo

#endif  // KOLO_TOPOLOGY_LINK_DEFAULTS_H_
