// topology/: what LoadTopologyXml makes of each shipped fixture (tests/fixtures/topologies, whose
// README.md lists the facts per file). Every expected value is reasoned from the fixture's README
// and PCI tree in the comment beside it, not copied from the program's output. The errors, the
// JSON round trip and discovery on this machine are in topology_io_test.cc, the real machines'
// exports in topology_exports_test.cc, the link model in link_model_test.cc.
#include "topology/topology.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/unit/topology_fixtures.h"
#include "topology/hwloc_topology.h"
#include "topology/link_defaults.h"
#include "topology/topology_json.h"

namespace kolo {
namespace {

using testing_topology::ExpectGpuLinkTable;
using testing_topology::Fixture;
using testing_topology::FixturePath;
using testing_topology::ShippedFixtures;
using Names = std::vector<std::string>;
using Ints = std::vector<int>;

using testing_topology::GpuBusIds;
using testing_topology::kGen3x8;
using testing_topology::kGen4x16;
using testing_topology::kGen5x16;
constexpr uint64_t kGiB = 1ull << 30;

std::vector<int> GpuPackages(const Topology& t) {
  std::vector<int> out;
  for (const Gpu& g : t.gpus) out.push_back(g.pci.package);
  return out;
}

bool AnyNoteHas(const Topology& t, const std::string& a, const std::string& b = "") {
  for (const std::string& n : t.notes) {
    if (n.find(a) != std::string::npos && n.find(b) != std::string::npos) return true;
  }
  return false;
}

// ---- 1. h100-nvswitch-8gpu.xml --------------------------------------------------------------

TEST(TopologyFixtures, H100CpusAndGpus) {
  const auto& t = Fixture("h100-nvswitch-8gpu.xml");
  ASSERT_TRUE(t.ok()) << t.status().message();
  // 2 packages x 4 cores x 2 PUs, one 1 TiB NUMA node per package, 105 MiB L3 per package.
  ASSERT_EQ(t->packages.size(), 2u);
  ASSERT_EQ(t->numa_nodes.size(), 2u);
  EXPECT_EQ(t->cores, 8);
  EXPECT_EQ(t->pus, 16);
  for (int p = 0; p < 2; ++p) {
    EXPECT_EQ(t->packages[p].cores, 4);
    EXPECT_EQ(t->packages[p].pus, 8);
    EXPECT_EQ(t->packages[p].cpu_model, "Intel(R) Xeon(R) Platinum 8480+");
    EXPECT_EQ(t->packages[p].cpu_vendor, "GenuineIntel");
    EXPECT_EQ(t->packages[p].l3_bytes, 105ull << 20);
    EXPECT_EQ(t->numa_nodes[p].package, p);
    EXPECT_EQ(t->numa_nodes[p].bytes, 1024 * kGiB);
  }
  // DGX H100 bus ids, nvml0-3 on package 0 and nvml4-7 on package 1; PCI order = nvml order.
  EXPECT_EQ(GpuBusIds(*t), (Names{"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
                                  "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"}));
  EXPECT_EQ(GpuPackages(*t), (Ints{0, 0, 0, 0, 1, 1, 1, 1}));
  for (int g = 0; g < 8; ++g) {
    const Gpu& gpu = t->gpus[g];
    EXPECT_EQ(gpu.model, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(gpu.pci.vendor_id, 0x10de);
    EXPECT_EQ(gpu.pci.device_id, 0x2330);
    EXPECT_EQ(gpu.pci.class_id, 0x0302);
    EXPECT_EQ(gpu.nvlink_generation, 4);  // 0x23xx = Hopper (link_defaults.h)
    EXPECT_EQ(gpu.pci.numa, gpu.pci.package);
    EXPECT_NEAR(gpu.pci.link_gbps, kGen5x16, 1e-4);
    EXPECT_NEAR(gpu.pci.path_gbps, kGen5x16, 1e-4);
    // cudaN sits next to nvmlN under GPU N.
    const Names& os = gpu.os_devices;
    EXPECT_NE(std::find(os.begin(), os.end(), "nvml" + std::to_string(g)), os.end());
    EXPECT_NE(std::find(os.begin(), os.end(), "cuda" + std::to_string(g)), os.end());
  }
  EXPECT_TRUE(t->notes.empty()) << t->notes.front();  // every speed known, no XML comments
}

TEST(TopologyFixtures, H100NvswitchMatrix) {
  const auto& t = Fixture("h100-nvswitch-8gpu.xml");
  ASSERT_TRUE(t.ok()) << t.status().message();
  // NVLinkBandwidth lists each GPU -> NVSwitch c8, c9, ca, cb at 125000, 125000, 100000, 100000
  // MB/s: 5, 5, 4 and 4 NVLink4 links of 25 GB/s. Every GPU has the same four, so through the
  // switches GPU i reaches GPU j at
  //   sum over switches s of min(bw(i,s), bw(j,s)) = 125 + 125 + 100 + 100 = 450 GB/s,
  // which is also the lower of the two GPUs' fabric totals (450, 450) the loader takes (an
  // NVSwitch fabric is all-to-all). 450 / NvlinkRawGbpsPerLink(4) = 450 / 25 = 18 links.
  const double per_link = NvlinkRawGbpsPerLink(4);
  const double expected = (5 + 5 + 4 + 4) * per_link;
  ASSERT_EQ(expected, 450.0);
  EXPECT_TRUE(t->nvswitch);
  ASSERT_EQ(t->nvlink_gbps.size(), 8u);
  ASSERT_EQ(t->nvlink_links.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 8; ++j) {
      // hwloc's diagonal is ignored: a GPU has no NVLink to itself.
      EXPECT_DOUBLE_EQ(t->nvlink_gbps[i][j], i == j ? 0 : expected) << i << "," << j;
      EXPECT_EQ(t->nvlink_links[i][j], i == j ? 0 : 18) << i << "," << j;
    }
  }
  // Every pair is NVLink, although the PCI ways (one host bridge per GPU) would be NODE/SYS.
  ExpectGpuLinkTable(*t, {
                             "X  NV NV NV NV NV NV NV",
                             "NV X  NV NV NV NV NV NV",
                             "NV NV X  NV NV NV NV NV",
                             "NV NV NV X  NV NV NV NV",
                             "NV NV NV NV X  NV NV NV",
                             "NV NV NV NV NV X  NV NV",
                             "NV NV NV NV NV NV X  NV",
                             "NV NV NV NV NV NV NV X ",
                         });
  // Without the matrix the PCI tree speaks: each GPU on its own host bridge (README), so two
  // GPUs of one package are NODE and of two packages SYS.
  EXPECT_EQ(PciLink(t->gpus[0].pci, t->gpus[1].pci), LinkClass::kNode);
  EXPECT_EQ(PciLink(t->gpus[0].pci, t->gpus[4].pci), LinkClass::kSys);
}

TEST(TopologyFixtures, H100SwitchesAndNics) {
  const auto& t = Fixture("h100-nvswitch-8gpu.xml");
  ASSERT_TRUE(t.ok()) << t.status().message();
  // 8 PEX switches with 1 GPU + 1 ConnectX-7 each. The 9th (the NVSwitches' own) holds neither
  // a GPU nor a NIC, so Topology::switches leaves it out. Upstream ports (16, 28, 38, 5b | 98,
  // a9, b8, d9) sort in the same order as the GPUs, so switch k holds GPU k and NIC k.
  ASSERT_EQ(t->switches.size(), 8u);
  ASSERT_EQ(t->nics.size(), 8u);
  const Names nic_bus = {"0000:19:00.0", "0000:2b:00.0", "0000:3b:00.0", "0000:5e:00.0",
                         "0000:9b:00.0", "0000:ac:00.0", "0000:bb:00.0", "0000:dc:00.0"};
  for (int k = 0; k < 8; ++k) {
    EXPECT_EQ(t->switches[k].gpus, Ints{k}) << "switch " << k;
    EXPECT_EQ(t->switches[k].nics, Ints{k}) << "switch " << k;
    EXPECT_EQ(t->switches[k].package, k / 4);
    const Nic& n = t->nics[k];
    EXPECT_EQ(n.pci.bus_id, nic_bus[k]);      // GPU bus + 1
    EXPECT_EQ(n.kind, NicKind::kInfiniBand);  // class 0207
    EXPECT_EQ(n.names, (Names{"ib" + std::to_string(k), "mlx5_" + std::to_string(k)}));
    EXPECT_EQ(n.speed_gbit, 400);  // ConnectX-7 15b3:1021, from the PCI id table
    EXPECT_EQ(n.speed_source, "PCI id table");
    EXPECT_EQ(n.pci.package, k / 4);
    // Same switch: PIX, and each GPU's closest NIC is its switch mate (and back).
    EXPECT_EQ(t->GpuNicLink(k, k), LinkClass::kPix);
    EXPECT_EQ(t->ClosestNic(k), k);
    EXPECT_EQ(t->ClosestGpus(k), Ints{k});
  }
  // A GPU and another switch's NIC: different host bridges, NODE in a package, else SYS.
  EXPECT_EQ(t->GpuNicLink(0, 1), LinkClass::kNode);
  EXPECT_EQ(t->GpuNicLink(0, 7), LinkClass::kSys);
  EXPECT_EQ(t->ClosestNicToPackage(0), 0);  // lowest index among package 0's RDMA NICs
  EXPECT_EQ(t->ClosestNicToPackage(1), 4);
}

// ---- 2. pcie-gen4-2s-4gpu.xml ---------------------------------------------------------------

TEST(TopologyFixtures, PcieGen4) {
  const auto& t = Fixture("pcie-gen4-2s-4gpu.xml");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->packages.size(), 2u);
  ASSERT_EQ(t->numa_nodes.size(), 2u);
  EXPECT_EQ(t->cores, 8);
  EXPECT_EQ(t->pus, 16);
  EXPECT_EQ(t->packages[0].cpu_vendor, "AuthenticAMD");
  EXPECT_EQ(t->numa_nodes[1].bytes, 256 * kGiB);
  EXPECT_EQ(t->packages[0].l3_bytes, 2 * (16ull << 20));  // 2 CCX of 16 MiB per package
  EXPECT_EQ(GpuBusIds(*t), (Names{"0000:43:00.0", "0000:44:00.0", "0000:c3:00.0", "0000:c4:00.0"}));
  EXPECT_EQ(GpuPackages(*t), (Ints{0, 0, 1, 1}));
  for (const Gpu& g : t->gpus) {
    EXPECT_EQ(g.model, "NVIDIA A100 80GB PCIe");
    EXPECT_EQ(g.nvlink_generation, 3);  // 0x20b5: Ampere, though no NVLink is wired here
    EXPECT_NEAR(g.pci.path_gbps, kGen4x16, 1e-4);
  }
  // No NVLinkBandwidth matrix: no NVLink at all.
  EXPECT_TRUE(t->nvlink_gbps.empty());
  EXPECT_FALSE(t->nvswitch);
  EXPECT_EQ(t->NvlinkGbps(0, 1), 0);
  // Switch A (41:00.0, package 0): GPU0, GPU1, ib0. Switch B (c1:00.0, package 1): GPU2, GPU3.
  ASSERT_EQ(t->switches.size(), 2u);
  EXPECT_EQ(t->switches[0].bus_id, "0000:41:00.0");
  EXPECT_EQ(t->switches[0].gpus, (Ints{0, 1}));
  EXPECT_EQ(t->switches[0].nics, Ints{0});
  EXPECT_EQ(t->switches[0].package, 0);
  EXPECT_EQ(t->switches[1].bus_id, "0000:c1:00.0");
  EXPECT_EQ(t->switches[1].gpus, (Ints{2, 3}));
  EXPECT_TRUE(t->switches[1].nics.empty());
  EXPECT_EQ(t->switches[1].package, 1);
  // NICs by bus: 45:00.0 ConnectX-6 HDR IB (200 Gbit/s), c5:00.0 E810 (100 GbE, Net only).
  ASSERT_EQ(t->nics.size(), 2u);
  EXPECT_EQ(t->nics[0].kind, NicKind::kInfiniBand);
  EXPECT_EQ(t->nics[0].names, (Names{"ib0", "mlx5_0"}));
  EXPECT_EQ(t->nics[0].speed_gbit, 200);
  EXPECT_EQ(t->nics[1].kind, NicKind::kEthernet);  // no OpenFabrics OSDev: no RDMA
  EXPECT_EQ(t->nics[1].names, Names{"ens1f0"});
  EXPECT_EQ(t->nics[1].speed_gbit, 100);
  EXPECT_EQ(t->nics[1].speed_source, "PCI id table");
  // GPU pairs: below one switch PIX; the two switches are on different host bridges of
  // different packages, so every cross pair is SYS.
  ExpectGpuLinkTable(*t, {
                             "X   PIX SYS SYS",
                             "PIX X   SYS SYS",
                             "SYS SYS X   PIX",
                             "SYS SYS PIX X  ",
                         });
  // The E810 sits on its own root port c0:03.1 under switch B's host bridge: from GPU2/3 the
  // way goes up to that host bridge and down again, PHB; from GPU0/1 it crosses packages.
  EXPECT_EQ(t->GpuNicLink(0, 0), LinkClass::kPix);
  EXPECT_EQ(t->GpuNicLink(2, 0), LinkClass::kSys);
  EXPECT_EQ(t->GpuNicLink(2, 1), LinkClass::kPhb);
  EXPECT_EQ(t->GpuNicLink(0, 1), LinkClass::kSys);
  // RDMA first: every GPU sends through the HCA, GPU0/1 next to it (PIX), GPU2/3 across the
  // packages (SYS) rather than through the E810, which has no RDMA (NCCL would use the HCA).
  EXPECT_EQ(t->ClosestNic(0), 0);
  EXPECT_EQ(t->ClosestNic(1), 0);
  EXPECT_EQ(t->ClosestNic(2), 0);
  EXPECT_EQ(t->ClosestNic(3), 0);
  EXPECT_EQ(t->ClosestGpus(0), (Ints{0, 1}));
  EXPECT_EQ(t->ClosestGpus(1), (Ints{2, 3}));
  // RDMA before locality: package 1's ranks use the HCA on package 0 too, not the E810.
  EXPECT_EQ(t->ClosestNicToPackage(0), 0);
  EXPECT_EQ(t->ClosestNicToPackage(1), 0);
  EXPECT_TRUE(t->notes.empty());
}

// ---- 3. nvlink-pairs-8gpu.xml ---------------------------------------------------------------

TEST(TopologyFixtures, NvlinkPairs) {
  const auto& t = Fixture("nvlink-pairs-8gpu.xml");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->packages.size(), 2u);
  EXPECT_EQ(t->cores, 8);
  EXPECT_EQ(t->pus, 16);
  EXPECT_EQ(t->numa_nodes[0].bytes, 512 * kGiB);
  EXPECT_EQ(GpuBusIds(*t), (Names{"0000:1a:00.0", "0000:1b:00.0", "0000:34:00.0", "0000:35:00.0",
                                  "0000:9a:00.0", "0000:9b:00.0", "0000:b4:00.0", "0000:b5:00.0"}));
  EXPECT_EQ(GpuPackages(*t), (Ints{0, 0, 0, 0, 1, 1, 1, 1}));
  // Homogeneous NVLinkBandwidth over nvml0-7: 300000 MB/s between 0-1, 2-3, 4-5, 6-7 (three
  // bridges, 12 NVLink3 links of 25 GB/s), 0 elsewhere; its 1000000 diagonal is ignored.
  EXPECT_FALSE(t->nvswitch);
  ASSERT_EQ(t->nvlink_gbps.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 8; ++j) {
      const bool partners = i != j && (i ^ 1) == j;
      EXPECT_DOUBLE_EQ(t->nvlink_gbps[i][j], partners ? 12 * NvlinkRawGbpsPerLink(3) : 0)
          << i << "," << j;
      EXPECT_EQ(t->nvlink_links[i][j], partners ? 12 : 0) << i << "," << j;
    }
  }
  // 4 switches, each on its own host bridge: {0,1,ib0}, {2,3}, {4,5,ib1}, {6,7}.
  ASSERT_EQ(t->switches.size(), 4u);
  EXPECT_EQ(t->switches[0].gpus, (Ints{0, 1}));
  EXPECT_EQ(t->switches[0].nics, Ints{0});
  EXPECT_EQ(t->switches[1].gpus, (Ints{2, 3}));
  EXPECT_TRUE(t->switches[1].nics.empty());
  EXPECT_EQ(t->switches[2].gpus, (Ints{4, 5}));
  EXPECT_EQ(t->switches[2].nics, Ints{1});
  EXPECT_EQ(t->switches[3].gpus, (Ints{6, 7}));
  // Partners NV; other GPUs of the package are behind another host bridge (NODE); across
  // packages SYS.
  ExpectGpuLinkTable(*t, {
                             "X    NV   NODE NODE SYS  SYS  SYS  SYS",
                             "NV   X    NODE NODE SYS  SYS  SYS  SYS",
                             "NODE NODE X    NV   SYS  SYS  SYS  SYS",
                             "NODE NODE NV   X    SYS  SYS  SYS  SYS",
                             "SYS  SYS  SYS  SYS  X    NV   NODE NODE",
                             "SYS  SYS  SYS  SYS  NV   X    NODE NODE",
                             "SYS  SYS  SYS  SYS  NODE NODE X    NV  ",
                             "SYS  SYS  SYS  SYS  NODE NODE NV   X   ",
                         });
  // The partner pair under one switch would be PIX without NVLink.
  EXPECT_EQ(PciLink(t->gpus[0].pci, t->gpus[1].pci), LinkClass::kPix);
  ASSERT_EQ(t->nics.size(), 2u);
  EXPECT_EQ(t->nics[0].pci.bus_id, "0000:1c:00.0");
  EXPECT_EQ(t->nics[1].pci.bus_id, "0000:9c:00.0");
  for (const Nic& n : t->nics) {
    EXPECT_EQ(n.kind, NicKind::kInfiniBand);
    EXPECT_EQ(n.speed_gbit, 200);  // ConnectX-6 15b3:101b
  }
  // GPU2/3 reach ib0 through their package (NODE) and ib1 across packages (SYS): ib0.
  for (int g = 0; g < 8; ++g) EXPECT_EQ(t->ClosestNic(g), g < 4 ? 0 : 1) << "GPU " << g;
  EXPECT_EQ(t->GpuNicLink(2, 0), LinkClass::kNode);
  EXPECT_EQ(t->ClosestGpus(0), (Ints{0, 1}));
  EXPECT_EQ(t->ClosestGpus(1), (Ints{4, 5}));
}

// ---- 4. cpu-2s.xml --------------------------------------------------------------------------

TEST(TopologyFixtures, Cpu2s) {
  const auto& t = Fixture("cpu-2s.xml");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->packages.size(), 2u);
  ASSERT_EQ(t->numa_nodes.size(), 2u);
  EXPECT_EQ(t->cores, 8);
  EXPECT_EQ(t->pus, 16);
  for (const Package& p : t->packages) EXPECT_EQ(p.l3_bytes, 28835840u);
  EXPECT_EQ(t->numa_nodes[0].bytes, 192 * kGiB);
  EXPECT_TRUE(t->gpus.empty());
  EXPECT_TRUE(t->switches.empty());
  EXPECT_TRUE(t->nvlink_gbps.empty());
  ASSERT_EQ(t->nics.size(), 2u);
  // 5e:00.0 ConnectX-4 Lx: class Ethernet with an OpenFabrics OSDev, so RoCE, 25 GbE.
  EXPECT_EQ(t->nics[0].kind, NicKind::kRoCE);
  EXPECT_EQ(t->nics[0].names, (Names{"enp94s0f0", "mlx5_0"}));
  EXPECT_EQ(t->nics[0].speed_gbit, 25);
  EXPECT_EQ(t->nics[0].pci.package, 0);
  // d8:00.0 X710: Net only, 10 GbE.
  EXPECT_EQ(t->nics[1].kind, NicKind::kEthernet);
  EXPECT_EQ(t->nics[1].names, Names{"eno1"});
  EXPECT_EQ(t->nics[1].speed_gbit, 10);
  EXPECT_EQ(t->nics[1].pci.package, 1);
  for (const Nic& n : t->nics) {
    EXPECT_EQ(n.speed_source, "PCI id table");
    EXPECT_NEAR(n.pci.path_gbps, kGen3x8, 1e-4);
  }
  // RDMA before locality: both packages' ranks use the RoCE ConnectX-4 Lx on package 0, not
  // the X710 (no RDMA) on package 1.
  EXPECT_EQ(t->ClosestNicToPackage(0), 0);
  EXPECT_EQ(t->ClosestNicToPackage(1), 0);
  EXPECT_TRUE(t->ClosestGpus(0).empty());
  EXPECT_TRUE(t->notes.empty());
}

// ---- 5. missing-link-speeds.xml -------------------------------------------------------------

TEST(TopologyFixtures, MissingLinkSpeedsLoadWithDefaultsNoted) {
  const auto& t = Fixture("missing-link-speeds.xml");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->packages.size(), 1u);
  ASSERT_EQ(t->numa_nodes.size(), 1u);
  EXPECT_EQ(t->cores, 4);
  EXPECT_EQ(t->pus, 8);
  EXPECT_EQ(t->numa_nodes[0].bytes, 96 * kGiB);
  ASSERT_EQ(t->gpus.size(), 2u);
  EXPECT_EQ(GpuBusIds(*t), (Names{"0000:3d:00.0", "0000:3e:00.0"}));
  for (const Gpu& g : t->gpus) {
    EXPECT_EQ(g.model, "Tesla T4");
    EXPECT_EQ(g.nvlink_generation, 0);  // 0x1eb8 Turing: not in the NVLink table
    EXPECT_EQ(g.pci.link_gbps, 0);      // absent or "0.000000"
    EXPECT_EQ(g.pci.path_gbps, 0);
    // I/O hangs below the Machine; the one package covers it.
    EXPECT_EQ(g.pci.package, 0);
  }
  // Both T4s behind the PEX 8747 (upstream 3b:00.0); the HCA on a second host bridge.
  ASSERT_EQ(t->switches.size(), 1u);
  EXPECT_EQ(t->switches[0].bus_id, "0000:3b:00.0");
  EXPECT_EQ(t->switches[0].gpus, (Ints{0, 1}));
  EXPECT_TRUE(t->switches[0].nics.empty());
  ExpectGpuLinkTable(*t, {"X PIX", "PIX X"});
  ASSERT_EQ(t->nics.size(), 1u);
  EXPECT_EQ(t->nics[0].kind, NicKind::kInfiniBand);
  EXPECT_EQ(t->nics[0].speed_gbit, 100);  // ConnectX-5 15b3:1017
  EXPECT_EQ(t->GpuNicLink(0, 0), LinkClass::kNode);
  EXPECT_EQ(t->ClosestNic(1), 0);
  EXPECT_EQ(t->ClosestGpus(0), (Ints{0, 1}));
  // Which devices got the Gen3 x16 default: both GPUs and the HCA, nothing else.
  EXPECT_TRUE(AnyNoteHas(*t, "GPU 0000:3d:00.0", "Gen3 x16")) << t->notes.size();
  EXPECT_TRUE(AnyNoteHas(*t, "GPU 0000:3e:00.0", "Gen3 x16"));
  EXPECT_TRUE(AnyNoteHas(*t, "NIC 0000:5e:00.0", "Gen3 x16"));
  EXPECT_EQ(t->notes.size(), 3u);
}

// ---- 6. this-machine.xml --------------------------------------------------------------------

TEST(TopologyFixtures, ThisMachineCapture) {
  const auto& t = Fixture("this-machine.xml");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->packages.size(), 1u);
  EXPECT_EQ(t->numa_nodes.size(), 1u);
  EXPECT_EQ(t->cores, 2);
  EXPECT_EQ(t->pus, 2);
  EXPECT_EQ(t->packages[0].cpu_vendor, "AuthenticAMD");
  EXPECT_EQ(t->hostname, "vm");
  EXPECT_TRUE(t->gpus.empty());
  EXPECT_TRUE(t->switches.empty());
  // Of the 6 virtio PCIDevs only the network one (class 0200, 1af4:1041) is a NIC: eth0, no
  // OpenFabrics, speed unknown to the id table (and never read from sysfs for an XML).
  ASSERT_EQ(t->nics.size(), 1u);
  EXPECT_EQ(t->nics[0].names, Names{"eth0"});
  EXPECT_EQ(t->nics[0].kind, NicKind::kEthernet);
  EXPECT_EQ(t->nics[0].pci.bus_id, "0000:00:03.0");
  EXPECT_EQ(t->nics[0].speed_gbit, 0);
  EXPECT_EQ(t->nics[0].speed_source, "");
  EXPECT_TRUE(AnyNoteHas(*t, "NIC 0000:00:03.0", "Gen3 x16"));
  EXPECT_TRUE(AnyNoteHas(*t, "NIC 0000:00:03.0", "10 Gbit/s assumed"));
  EXPECT_EQ(t->ClosestNicToPackage(0), 0);
}

}  // namespace
}  // namespace kolo
