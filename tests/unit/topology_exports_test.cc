// topology/ on real machines' hwloc exports, read from the folder CMake's
// KOLO_TOPOLOGY_EXPORTS_DIR names (tests/CMakeLists.txt). They are not shipped with kolo (their
// licences do not allow it), so every test here skips when no such folder is given. The expected
// counts, NVLink figures and switch sharing are the machines' published facts, reasoned into kolo's
// terms in the comments.
#include <sys/stat.h>

#include <string>
#include <vector>

#include "tests/unit/topology_fixtures.h"
#include "topology/hwloc_topology.h"
#include "topology/link_defaults.h"
#include "topology/link_model.h"
#include "topology/topology.h"
#include "topology/topology_json.h"

namespace kolo {
namespace {

using testing_topology::ExpectGpuLinkTable;
using testing_topology::LoadCached;
using testing_topology::SharedPath;
using Ints = std::vector<int>;

constexpr const char* kNoExports =
    "no folder of real machines' exports (cmake -DKOLO_TOPOLOGY_EXPORTS_DIR=...): "
    "'" KOLO_TOPOLOGY_EXPORTS_DIR "'";

bool SharedPresent() {
  struct stat st;
  return stat(KOLO_TOPOLOGY_EXPORTS_DIR, &st) == 0 && S_ISDIR(st.st_mode);
}

#define KOLO_LOAD_EXPORT_OR_SKIP(var, name)                          \
  if (!SharedPresent()) GTEST_SKIP() << kNoExports;                  \
  const StatusOr<Topology>& var##_or = LoadCached(SharedPath(name)); \
  ASSERT_TRUE(var##_or.ok()) << var##_or.status().message();         \
  const Topology& var = *var##_or

// The switch (index into t.switches) holding GPU g, -1 when none.
int SwitchOfGpu(const Topology& t, int g) {
  for (int s = 0; s < static_cast<int>(t.switches.size()); ++s) {
    for (int x : t.switches[s].gpus) {
      if (x == g) return s;
    }
  }
  return -1;
}

TEST(TopologyExports, Dgx2hSixteenV100ThroughNvswitch) {
  KOLO_LOAD_EXPORT_OR_SKIP(t, "nvidia-dgx2h-16xv100-nvswitch-10ib.hwloc.xml");
  ASSERT_EQ(t.packages.size(), 2u);
  EXPECT_EQ(t.cores, 48);
  EXPECT_EQ(t.pus, 96);
  ASSERT_EQ(t.gpus.size(), 16u);
  for (const Gpu& g : t.gpus) {
    EXPECT_EQ(g.model, "Tesla V100-SXM3-32GB-H");
    EXPECT_EQ(g.nvlink_generation, 2);  // 10de:1db8, Volta
  }
  // Each GPU has 6 NVLink2 links of 25 GB/s, one to each of 6 of the 12 NVSwitches (its
  // baseboard's); the two baseboards' switches are trunked, so every pair, on one board or
  // across, gets the lower fabric total min(6 x 25, 6 x 25) = 150 GB/s = 6 links. (Summing
  // min(bw(i,s), bw(j,s)) over switches would give 0 across boards: the switches differ.)
  EXPECT_TRUE(t.nvswitch);
  ASSERT_EQ(t.nvlink_gbps.size(), 16u);
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) {
      EXPECT_DOUBLE_EQ(t.nvlink_gbps[i][j], i == j ? 0 : 6 * NvlinkRawGbpsPerLink(2));
      EXPECT_EQ(t.nvlink_links[i][j], i == j ? 0 : 6);
      if (i != j) {
        EXPECT_EQ(t.GpuLink(i, j), LinkClass::kNVLink) << i << "," << j;
      }
    }
  }
  // 8 leaf PLX switches, each with 2 GPUs and 1 InfiniBand HCA, cover the 16 GPUs.
  int leaf = 0;
  for (const PcieSwitch& s : t.switches) {
    if (s.gpus.empty()) continue;
    ++leaf;
    EXPECT_EQ(s.gpus.size(), 2u) << s.bus_id;
    ASSERT_EQ(s.nics.size(), 1u) << s.bus_id;
    const int n = s.nics[0];
    EXPECT_EQ(t.nics[n].kind, NicKind::kInfiniBand);
    for (int g : s.gpus) {
      EXPECT_EQ(t.ClosestNic(g), n) << "GPU " << g;
      EXPECT_EQ(t.GpuNicLink(g, n), LinkClass::kPix);
    }
    EXPECT_EQ(t.ClosestGpus(n), s.gpus);
  }
  EXPECT_EQ(leaf, 8);
  for (int g = 0; g < 16; ++g) EXPECT_GE(SwitchOfGpu(t, g), 0) << "GPU " << g;
  // 10 IB HCAs, the Ethernet-mode ConnectX-5 with OpenFabrics (RoCE), and the I210.
  int ib = 0, roce = 0, eth = 0;
  for (const Nic& n : t.nics) {
    ib += n.kind == NicKind::kInfiniBand;
    roce += n.kind == NicKind::kRoCE;
    eth += n.kind == NicKind::kEthernet;
  }
  EXPECT_EQ(ib, 10);
  EXPECT_EQ(roce, 1);
  EXPECT_EQ(eth, 1);
  // And the link model over it: 16 ranks, every pair 6 NVLink2 links at the achievable rate.
  auto m = BuildLinkModel(JobLayout::Uniform(t, 1, 16));
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->intra_device.cls, LinkClass::kNVLink);
  EXPECT_EQ(m->intra_device.nvlinks, 6);
  EXPECT_DOUBLE_EQ(m->intra_device.gbps, 6 * NvlinkAchievableGbpsPerLink(2));
}

TEST(TopologyExports, Power8MinskyNvlinkPairs) {
  KOLO_LOAD_EXPORT_OR_SKIP(t, "ibm-power8-minsky-4xp100-nvlink.hwloc.xml");
  ASSERT_EQ(t.packages.size(), 2u);
  EXPECT_EQ(t.cores, 8);
  EXPECT_EQ(t.pus, 16);
  ASSERT_EQ(t.gpus.size(), 4u);
  EXPECT_TRUE(t.nics.empty());
  EXPECT_TRUE(t.switches.empty());
  // NVLinkBandwidth: 40000 MB/s for 0-1 and 2-3 (two NVLink1 links of 20 GB/s) and for each
  // GPU <-> its package, which is no GPU pair and no NVSwitch, so it is left out.
  EXPECT_FALSE(t.nvswitch);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(t.gpus[i].nvlink_generation, 1);  // 10de:15f9, Pascal
    EXPECT_EQ(t.gpus[i].pci.package, i / 2);
    for (int j = 0; j < 4; ++j) {
      const bool partners = i != j && i / 2 == j / 2;
      EXPECT_DOUBLE_EQ(t.NvlinkGbps(i, j), partners ? 2 * NvlinkRawGbpsPerLink(1) : 0);
      EXPECT_EQ(t.nvlink_links[i][j], partners ? 2 : 0);
    }
  }
  // Each GPU on its own host bridge; 0,1 on package 0 and 2,3 on package 1.
  ExpectGpuLinkTable(t, {
                            "X   NV  SYS SYS",
                            "NV  X   SYS SYS",
                            "SYS SYS X   NV ",
                            "SYS SYS NV  X  ",
                        });
  // POWER8's CPUModel names the interconnect: POWER (NCCL's P9_BW) rather than the fallback.
  EXPECT_EQ(InterconnectGbps(t.packages[0].cpu_vendor, t.packages[0].cpu_model), 32.0);
}

TEST(TopologyExports, JuwelsBoosterEachGpuSharesASwitchWithOneHca) {
  KOLO_LOAD_EXPORT_OR_SKIP(t, "jsc-juwels-booster-2s-4xa100-4xib.hwloc.xml");
  ASSERT_EQ(t.packages.size(), 2u);
  EXPECT_EQ(t.numa_nodes.size(), 8u);
  EXPECT_EQ(t.cores, 48);
  ASSERT_EQ(t.gpus.size(), 4u);
  EXPECT_TRUE(t.nvlink_gbps.empty());  // no NVML in that hwloc build
  // GPUs 03, 44, 84, c4 and HCAs 04 (mlx5_0), 43 (mlx5_1), 83 (mlx5_2), c3 (mlx5_3): sorted
  // by bus id, GPU k and HCA k share switch k.
  for (int g = 0; g < 4; ++g) {
    EXPECT_EQ(t.gpus[g].pci.device_id, 0x20b0);
    const int s = SwitchOfGpu(t, g);
    ASSERT_GE(s, 0) << "GPU " << g;
    EXPECT_EQ(t.switches[s].gpus, Ints{g});
    EXPECT_EQ(t.switches[s].nics, Ints{g});
    EXPECT_EQ(t.nics[g].kind, NicKind::kInfiniBand);
    EXPECT_EQ(t.nics[g].names[1], "mlx5_" + std::to_string(g));
    EXPECT_EQ(t.nics[g].speed_gbit, 200);
    EXPECT_EQ(t.ClosestNic(g), g);
    EXPECT_EQ(t.GpuNicLink(g, g), LinkClass::kPix);
  }
}

TEST(TopologyExports, PascalTwoGpusAndHcaUnderOneSwitch) {
  KOLO_LOAD_EXPORT_OR_SKIP(t, "llnl-pascal-2s-2xp100-pcieswitch-ib.hwloc.xml");
  ASSERT_EQ(t.gpus.size(), 2u);
  ASSERT_EQ(t.switches.size(), 1u);
  EXPECT_EQ(t.switches[0].gpus, (Ints{0, 1}));
  ASSERT_EQ(t.switches[0].nics.size(), 1u);
  const int hca = t.switches[0].nics[0];
  EXPECT_EQ(t.nics[hca].kind, NicKind::kInfiniBand);
  EXPECT_EQ(t.nics[hca].speed_gbit, 100);  // ConnectX-5 15b3:1017
  ExpectGpuLinkTable(t, {"X PIX", "PIX X"});
  EXPECT_EQ(t.ClosestNic(0), hca);
  EXPECT_EQ(t.ClosestNic(1), hca);
  EXPECT_EQ(t.ClosestGpus(hca), (Ints{0, 1}));
}

TEST(TopologyExports, Hwloc1XmlLoads) {
  // JUWELS Cluster GPU node, an hwloc 1.11 export: 2 PLX switches with 2 V100 + 1 HCA each.
  KOLO_LOAD_EXPORT_OR_SKIP(t, "jsc-juwels-cluster-gpu-2s-4xv100-2xib.hwloc1.xml");
  ASSERT_EQ(t.packages.size(), 2u);
  EXPECT_EQ(t.cores, 40);
  EXPECT_EQ(t.pus, 80);
  ASSERT_EQ(t.gpus.size(), 4u);  // the Matrox VGA (102b:0522) is not a GPU kolo can use
  for (const Gpu& g : t.gpus) EXPECT_EQ(g.pci.device_id, 0x1db1);
  int shared = 0;
  for (const PcieSwitch& s : t.switches) {
    if (s.gpus.size() == 2 && s.nics.size() == 1) ++shared;
  }
  EXPECT_EQ(shared, 2);
  auto json = TopologyFromJson(TopologyToJson(t), "hwloc1");
  ASSERT_TRUE(json.ok()) << json.status().message();
}

TEST(TopologyExports, OtherRealExportsLoad) {
  if (!SharedPresent()) GTEST_SKIP() << kNoExports;
  // Lassen: 4 V100 in 2 PLX pairs, the HCAs on their own host bridges (no NVLink matrix).
  const auto& lassen = LoadCached(SharedPath("llnl-lassen-power9-4xv100-ib.hwloc.xml"));
  ASSERT_TRUE(lassen.ok()) << lassen.status().message();
  EXPECT_EQ(lassen->gpus.size(), 4u);
  EXPECT_TRUE(lassen->nvlink_gbps.empty());
  ExpectGpuLinkTable(*lassen, {
                                  "X   PIX SYS SYS",
                                  "PIX X   SYS SYS",
                                  "SYS SYS X   PIX",
                                  "SYS SYS PIX X  ",
                              });
  // g4dn.metal: 8 T4 without a switch between them; one EFA and one ENA.
  const auto& g4 = LoadCached(SharedPath("aws-g4dn-metal-2s-8xt4-efa.hwloc.xml"));
  ASSERT_TRUE(g4.ok()) << g4.status().message();
  EXPECT_EQ(g4->gpus.size(), 8u);
  for (const PcieSwitch& s : g4->switches) EXPECT_TRUE(s.gpus.empty()) << s.bus_id;
  int efa = 0;
  for (const Nic& n : g4->nics) efa += n.kind == NicKind::kEfa && n.speed_gbit == 100;
  EXPECT_EQ(efa, 1);
}

TEST(TopologyExports, NcclTopologyFilesAreRefused) {
  // NCCL's <system> format is not an hwloc export: a clear kInvalidArgument, not a crash.
  if (!SharedPresent()) GTEST_SKIP() << kNoExports;
  const std::string path = SharedPath("azure-ndv5-8xh100-8xib.nccl.xml");
  auto t = LoadTopologyXml(path);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find(path), std::string::npos) << t.status().message();
}

}  // namespace
}  // namespace kolo
