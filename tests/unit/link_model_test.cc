// topology/link_model.h over the shipped fixtures: rank placement, the link of every pair, NIC
// sharing and the job's bottlenecks. Every expected rate is computed here from the constants of
// topology/link_defaults.h and the fixture's facts (tests/fixtures/topologies/README.md), with
// the reasoning beside it, so a changed default moves test and model together but a changed
// formula does not.
#include "topology/link_model.h"

#include <algorithm>
#include <string>
#include <vector>

#include "tests/unit/has_text.h"
#include "tests/unit/topology_fixtures.h"
#include "topology/link_defaults.h"
#include "topology/topology.h"

namespace kolo {
namespace {

using testing_topology::Fixture;
using testing_topology::kGen4x16;
using testing_topology::kGen5x16;

// Achievable GB/s of a NIC port of `gbit` Gbit/s shared by `ranks` ranks.
double NicShare(double gbit, int ranks) { return gbit / 8 * kNicEfficiency / ranks; }

const Topology& Load(const std::string& name) {
  const auto& t = Fixture(name);
  EXPECT_TRUE(t.ok()) << name << ": " << t.status().message();
  static const Topology kEmpty;
  return t.ok() ? *t : kEmpty;
}

LinkModel Build(const JobLayout& job) {
  auto m = BuildLinkModel(job);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? *m : LinkModel();
}

using kolo::testing::Has;

// ---- h100-nvswitch-8gpu.xml -----------------------------------------------------------------

TEST(LinkModel, H100EightRanksOneNode) {
  const Topology& t = Load("h100-nvswitch-8gpu.xml");
  ASSERT_EQ(t.gpus.size(), 8u);
  const LinkModel m = Build(JobLayout::Uniform(t, 1, 8));
  EXPECT_FALSE(m.multi_node);
  EXPECT_TRUE(m.homogeneous);
  EXPECT_TRUE(m.gpus);
  ASSERT_EQ(m.ranks.size(), 8u);
  ASSERT_EQ(m.nodes.size(), 1u);
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(m.ranks[r].node, 0);
    EXPECT_EQ(m.ranks[r].local_rank, r);
    EXPECT_EQ(m.ranks[r].gpu, r);          // local_rank % 8
    EXPECT_EQ(m.ranks[r].nic, r);          // the HCA on the GPU's switch
    EXPECT_EQ(m.ranks[r].package, r / 4);  // each on its GPU's package: GPUs 0-3 on package 0
  }
  // Every GPU pair: 18 NVLink4 links through the switches (topology_test.cc derives the 18),
  // each at NCCL's achievable 20.6 GB/s.
  EXPECT_EQ(m.intra_device.cls, LinkClass::kNVLink);
  EXPECT_EQ(m.intra_device.nvlinks, 18);
  EXPECT_DOUBLE_EQ(m.intra_device.gbps, 18 * NvlinkAchievableGbpsPerLink(4));
  EXPECT_EQ(m.intra_device.alpha_us, kNvlinkHopUs);
  EXPECT_TRUE(Has(m.intra_device.basis, "NVLink x18")) << m.intra_device.basis;
  EXPECT_TRUE(Has(m.intra_device.basis, "NVSwitch")) << m.intra_device.basis;
  // Host buffers: in a package shm at kShmGbps; across packages min(kShmGbps, Intel's 10) at
  // the same rate, but later (+kCrossPackageExtraAlphaUs), so the cross-package pair is slowest.
  EXPECT_EQ(m.intra_host.cls, LinkClass::kSys);
  EXPECT_DOUBLE_EQ(m.intra_host.gbps, std::min(kShmGbps, InterconnectGbps("GenuineIntel", "")));
  EXPECT_DOUBLE_EQ(m.intra_host.alpha_us, kShmAlphaUs + kCrossPackageExtraAlphaUs);
  EXPECT_EQ(m.nodes[0].host[0][1].cls, LinkClass::kShm);
  EXPECT_EQ(m.nodes[0].host[0][4].cls, LinkClass::kSys);
  // One ConnectX-7 (400 Gbit/s) per rank, unshared; from GPU memory the Gen5 x16 link
  // (63 x 12/15.75 = 48 GB/s) is no slower, and the HCA is PIX, so GPUDirect (no staging).
  const double nic = NicShare(400, 1);
  EXPECT_DOUBLE_EQ(m.inter_host.gbps, nic);
  EXPECT_EQ(m.inter_host.alpha_us, NicAlphaUs(NicKind::kInfiniBand));
  EXPECT_NEAR(m.inter_device.gbps, std::min(nic, kGen5x16 * kPcieEfficiency), 1e-9);
  EXPECT_EQ(m.inter_device.alpha_us, NicAlphaUs(NicKind::kInfiniBand));
  EXPECT_FALSE(Has(m.inter_device.basis, "staged")) << m.inter_device.basis;
  EXPECT_EQ(m.cache_bytes, 2.0 * (105 << 20));  // 105 MiB L3 per package
  EXPECT_TRUE(m.notes.empty());
}

TEST(LinkModel, H100TwoRanksPerGpuShareGpuAndNic) {
  const Topology& t = Load("h100-nvswitch-8gpu.xml");
  const LinkModel m = Build(JobLayout::Uniform(t, 1, 16));
  ASSERT_EQ(m.ranks.size(), 16u);
  EXPECT_EQ(m.ranks[9].gpu, 1);  // local rank 9 % 8 GPUs
  EXPECT_EQ(m.nodes[0].device[1][9].cls, LinkClass::kSelf);
  EXPECT_EQ(m.intra_device.cls, LinkClass::kNVLink);  // a shared GPU is never the bottleneck
  // Local ranks l and l + 8 both use HCA l: half its rate each.
  EXPECT_DOUBLE_EQ(m.nodes[0].nic_host[9].gbps, NicShare(400, 2));
  EXPECT_TRUE(Has(m.nodes[0].nic_host[9].basis, "shared by 2")) << m.nodes[0].nic_host[9].basis;
  EXPECT_DOUBLE_EQ(m.inter_host.gbps, NicShare(400, 2));
}

TEST(LinkModel, MultiNodeAndSimulatedNodes) {
  const Topology& t = Load("h100-nvswitch-8gpu.xml");
  JobLayout job = JobLayout::Uniform(t, 2, 8);
  ASSERT_EQ(job.ranks(), 16);
  LinkModel m = Build(job);
  EXPECT_TRUE(m.multi_node);
  EXPECT_TRUE(m.homogeneous);
  ASSERT_EQ(m.nodes.size(), 2u);
  EXPECT_EQ(m.nodes[1].ranks, (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(m.ranks[8].node, 1);
  EXPECT_EQ(m.ranks[8].local_rank, 0);
  EXPECT_EQ(m.ranks[8].gpu, 0);
  EXPECT_EQ(m.ranks[15].gpu, 7);
  // Nodes made by KOLO_NODE_GROUPING on one machine are not a network.
  job.simulated_nodes = true;
  m = Build(job);
  EXPECT_FALSE(m.multi_node);
  EXPECT_TRUE(std::any_of(m.notes.begin(), m.notes.end(),
                          [](const std::string& n) { return Has(n, "simulated"); }));
  // One node.
  EXPECT_FALSE(Build(JobLayout::Uniform(t, 1, 8)).multi_node);
}

TEST(LinkModel, HeterogeneousNodes) {
  JobLayout job = JobLayout::Uniform(Load("h100-nvswitch-8gpu.xml"), 1, 2);
  job.nodes.push_back(Load("nvlink-pairs-8gpu.xml"));
  job.node_of_rank.insert(job.node_of_rank.end(), {1, 1});
  job.local_rank_of.insert(job.local_rank_of.end(), {0, 1});
  const LinkModel m = Build(job);
  EXPECT_FALSE(m.homogeneous);
  EXPECT_TRUE(m.multi_node);
  // The slower node sets the bottleneck: the A100 NVLink pair, 12 links.
  EXPECT_EQ(m.intra_device.nvlinks, 12);
  EXPECT_DOUBLE_EQ(m.intra_device.gbps, 12 * NvlinkAchievableGbpsPerLink(3));
}

// ---- nvlink-pairs-8gpu.xml ------------------------------------------------------------------

TEST(LinkModel, NvlinkPairsTwoRanksUseTheBridge) {
  const LinkModel m = Build(JobLayout::Uniform(Load("nvlink-pairs-8gpu.xml"), 1, 2));
  // GPUs 0 and 1 are bridged partners: 12 NVLink3 links at NCCL's achievable 20 GB/s.
  EXPECT_EQ(m.intra_device.cls, LinkClass::kNVLink);
  EXPECT_EQ(m.intra_device.nvlinks, 12);
  EXPECT_DOUBLE_EQ(m.intra_device.gbps, 12 * NvlinkAchievableGbpsPerLink(3));
  EXPECT_FALSE(Has(m.intra_device.basis, "NVSwitch")) << m.intra_device.basis;
  // Unbound GPU ranks sit by their GPUs, both on package 0: shared memory in one package.
  EXPECT_EQ(m.ranks[1].package, 0);
  EXPECT_EQ(m.intra_host.cls, LinkClass::kShm);
}

TEST(LinkModel, NvlinkPairsFourRanksOnePackage) {
  const LinkModel m = Build(JobLayout::Uniform(Load("nvlink-pairs-8gpu.xml"), 1, 4));
  // GPUs 0-3, all on package 0: pairs 0-1 and 2-3 NVLink, the rest cross host bridges (NODE)
  // at the Gen4 x16 rate: 31.5 x 12/15.75 = 24 GB/s, below 240 GB/s of NVLink.
  EXPECT_EQ(m.intra_device.cls, LinkClass::kNode);
  EXPECT_NEAR(m.intra_device.gbps, kGen4x16 * kPcieEfficiency, 1e-5);
  EXPECT_EQ(m.intra_device.alpha_us, kPcieHopUs);
  // All four take ib0 (GPU2/3 reach it through their package, ib1 only across): 4 sharers.
  for (int r = 0; r < 4; ++r) EXPECT_EQ(m.ranks[r].nic, 0) << r;
  EXPECT_DOUBLE_EQ(m.inter_host.gbps, NicShare(200, 4));
  // From GPU2/3 the HCA is NODE: no GPUDirect RDMA, staged through host memory (+1 PCIe hop);
  // same rate as GPU0/1's, later, so it is the inter-node device bottleneck.
  EXPECT_DOUBLE_EQ(m.inter_device.gbps, NicShare(200, 4));
  EXPECT_DOUBLE_EQ(m.inter_device.alpha_us, NicAlphaUs(NicKind::kInfiniBand) + kPcieHopUs);
  EXPECT_TRUE(Has(m.inter_device.basis, "staged")) << m.inter_device.basis;
  EXPECT_FALSE(Has(m.nodes[0].nic_device[0].basis, "staged"));
}

TEST(LinkModel, NvlinkPairsEightRanksLimitedByTheInterconnect) {
  const Topology& t = Load("nvlink-pairs-8gpu.xml");
  const LinkModel m = Build(JobLayout::Uniform(t, 1, 8));
  // The slowest GPU pair crosses packages over PCIe: min(24 GB/s of Gen4 x16, Intel's UPI
  // figure of 10 GB/s), two PCIe hops.
  EXPECT_EQ(m.intra_device.cls, LinkClass::kSys);
  EXPECT_DOUBLE_EQ(m.intra_device.gbps,
                   std::min(kGen4x16 * kPcieEfficiency,
                            InterconnectGbps(t.packages[0].cpu_vendor, t.packages[0].cpu_model)));
  EXPECT_EQ(m.intra_device.gbps, 10.0);
  EXPECT_EQ(m.intra_device.alpha_us, 2 * kPcieHopUs);
  // Pair links, spot: NV for partners, NODE in a package, SYS across.
  EXPECT_EQ(m.nodes[0].device[6][7].cls, LinkClass::kNVLink);
  EXPECT_EQ(m.nodes[0].device[4][6].cls, LinkClass::kNode);
  EXPECT_EQ(m.nodes[0].device[3][4].cls, LinkClass::kSys);
  // Each HCA shared by its package's 4 ranks.
  EXPECT_DOUBLE_EQ(m.inter_host.gbps, NicShare(200, 4));
}

// ---- pcie-gen4-2s-4gpu.xml ------------------------------------------------------------------

TEST(LinkModel, PcieGen4NicSharing) {
  const Topology& t = Load("pcie-gen4-2s-4gpu.xml");
  const LinkModel m = Build(JobLayout::Uniform(t, 1, 4));
  // RDMA first: all four GPUs send through the HDR HCA (GPU2/3 across the packages rather
  // than through the E810, which has no RDMA), so four ranks share it.
  ASSERT_EQ(m.ranks.size(), 4u);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(m.ranks[r].nic, 0) << "rank " << r;
  const NodeLinks& n = m.nodes[0];
  for (int r = 0; r < 4; ++r) EXPECT_DOUBLE_EQ(n.nic_host[r].gbps, NicShare(200, 4));
  EXPECT_EQ(n.nic_host[2].alpha_us, NicAlphaUs(NicKind::kInfiniBand));
  EXPECT_DOUBLE_EQ(m.inter_host.gbps, NicShare(200, 4));
  // GPU memory to the HCA on the same switch: GPUDirect. From GPU2 the HCA is across the
  // packages (SYS): staged through host memory, one PCIe hop more.
  EXPECT_FALSE(Has(n.nic_device[0].basis, "staged")) << n.nic_device[0].basis;
  EXPECT_TRUE(Has(n.nic_device[2].basis, "staged")) << n.nic_device[2].basis;
  EXPECT_DOUBLE_EQ(n.nic_device[2].alpha_us, NicAlphaUs(NicKind::kInfiniBand) + kPcieHopUs);
  // GPU pairs across packages: PCIe at 24 GB/s, capped by AMD's 16 GB/s.
  EXPECT_EQ(m.intra_device.cls, LinkClass::kSys);
  EXPECT_DOUBLE_EQ(m.intra_device.gbps, InterconnectGbps("AuthenticAMD", ""));
  EXPECT_EQ(n.device[0][1].cls, LinkClass::kPix);
  EXPECT_NEAR(n.device[0][1].gbps, kGen4x16 * kPcieEfficiency, 1e-5);
}

TEST(LinkModel, RankToGpuIsLocalRankModuloGpus) {
  const LinkModel m = Build(JobLayout::Uniform(Load("pcie-gen4-2s-4gpu.xml"), 1, 6));
  std::vector<int> gpus;
  for (const RankPlace& r : m.ranks) gpus.push_back(r.gpu);
  EXPECT_EQ(gpus, (std::vector<int>{0, 1, 2, 3, 0, 1}));
  // All six ranks on the HCA (RDMA first).
  EXPECT_DOUBLE_EQ(m.nodes[0].nic_host[4].gbps, NicShare(200, 6));
}

// ---- cpu-2s.xml -----------------------------------------------------------------------------

TEST(LinkModel, Cpu2sTwoRanksCrossPackages) {
  const Topology& t = Load("cpu-2s.xml");
  const LinkModel m = Build(JobLayout::Uniform(t, 1, 2));
  EXPECT_FALSE(m.gpus);
  EXPECT_TRUE(m.nodes[0].device.empty());
  EXPECT_TRUE(m.nodes[0].nic_device.empty());
  EXPECT_EQ(m.ranks[0].gpu, -1);
  EXPECT_EQ(m.ranks[0].package, 0);
  EXPECT_EQ(m.ranks[1].package, 1);
  // Cross-package shared memory: min(kShmGbps, Intel's interconnect), later by the remote
  // cache-line transfers.
  EXPECT_EQ(m.intra_host.cls, LinkClass::kSys);
  EXPECT_DOUBLE_EQ(m.intra_host.gbps,
                   std::min(kShmGbps, InterconnectGbps(t.packages[0].cpu_vendor, "")));
  EXPECT_DOUBLE_EQ(m.intra_host.alpha_us, kShmAlphaUs + kCrossPackageExtraAlphaUs);
  // RDMA first: both ranks take the RoCE 25 GbE port (package 0), not the X710 (10 GbE, no
  // RDMA) of package 1, and share it.
  EXPECT_EQ(m.ranks[0].nic, 0);
  EXPECT_EQ(m.ranks[1].nic, 0);
  EXPECT_DOUBLE_EQ(m.nodes[0].nic_host[0].gbps, NicShare(25, 2));
  EXPECT_EQ(m.nodes[0].nic_host[0].alpha_us, NicAlphaUs(NicKind::kRoCE));
  EXPECT_DOUBLE_EQ(m.inter_host.gbps, NicShare(25, 2));
  EXPECT_EQ(m.inter_host.alpha_us, NicAlphaUs(NicKind::kRoCE));
  EXPECT_EQ(m.cache_bytes, 2.0 * 28835840);
}

TEST(LinkModel, Cpu2sBoundPackagesAndOneRank) {
  const Topology& t = Load("cpu-2s.xml");
  JobLayout job = JobLayout::Uniform(t, 1, 2);
  job.bound_package = {0, 0};  // both bound to package 0: shm inside it, one NIC for two
  LinkModel m = Build(job);
  EXPECT_EQ(m.ranks[1].package, 0);
  EXPECT_EQ(m.intra_host.cls, LinkClass::kShm);
  EXPECT_DOUBLE_EQ(m.intra_host.gbps, kShmGbps);
  EXPECT_DOUBLE_EQ(m.intra_host.alpha_us, kShmAlphaUs);
  EXPECT_DOUBLE_EQ(m.inter_host.gbps, NicShare(25, 2));
  // One rank: no pair at all; intra_host keeps the shm figures.
  m = Build(JobLayout::Uniform(t, 1, 1));
  EXPECT_EQ(m.intra_host.cls, LinkClass::kShm);
  EXPECT_DOUBLE_EQ(m.intra_host.gbps, kShmGbps);
  // Four ranks fill the packages in blocks: 0,0,1,1.
  m = Build(JobLayout::Uniform(t, 1, 4));
  std::vector<int> packages;
  for (const RankPlace& r : m.ranks) packages.push_back(r.package);
  EXPECT_EQ(packages, (std::vector<int>{0, 0, 1, 1}));
}

// ---- missing-link-speeds.xml, this-machine.xml ----------------------------------------------

TEST(LinkModel, MissingLinkSpeedsUseTheGen3Default) {
  const LinkModel m = Build(JobLayout::Uniform(Load("missing-link-speeds.xml"), 1, 2));
  // Both T4s under one switch with no speed known: Gen3 x16 assumed, 15.75 x 12/15.75 = 12.
  EXPECT_EQ(m.intra_device.cls, LinkClass::kPix);
  EXPECT_DOUBLE_EQ(m.intra_device.gbps, kDefaultPcieRawGbps * kPcieEfficiency);
  // The ConnectX-5 (100 Gbit/s) on another host bridge: shared by 2, staged (NODE).
  EXPECT_DOUBLE_EQ(m.inter_host.gbps, NicShare(100, 2));
  EXPECT_DOUBLE_EQ(m.inter_device.gbps,
                   std::min(NicShare(100, 2), kDefaultPcieRawGbps * kPcieEfficiency));
  EXPECT_TRUE(Has(m.inter_device.basis, "staged")) << m.inter_device.basis;
  // The loader's notes travel into the model, so kolo-topo shows the defaults.
  EXPECT_EQ(m.notes.size(), 3u);
}

TEST(LinkModel, ThisMachineCaptureAssumesTheNicSpeed) {
  const LinkModel m = Build(JobLayout::Uniform(Load("this-machine.xml"), 1, 2));
  EXPECT_FALSE(m.gpus);
  EXPECT_EQ(m.intra_host.cls, LinkClass::kShm);  // one package
  EXPECT_DOUBLE_EQ(m.intra_host.gbps, kShmGbps);
  EXPECT_DOUBLE_EQ(m.inter_host.gbps, NicShare(kDefaultNicGbit, 2));
  EXPECT_TRUE(Has(m.inter_host.basis, "assumed")) << m.inter_host.basis;
}

// ---- Invalid layouts ------------------------------------------------------------------------

TEST(LinkModel, InvalidLayoutNamesTheRank) {
  const Topology& t = Load("cpu-2s.xml");
  JobLayout job = JobLayout::Uniform(t, 1, 2);
  job.node_of_rank[1] = 1;  // node 1 has no topology
  auto m = BuildLinkModel(job);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(m.status().message(), "rank 1")) << m.status().message();

  job = JobLayout::Uniform(t, 1, 2);
  job.node_of_rank[0] = -1;
  m = BuildLinkModel(job);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(Has(m.status().message(), "rank 0")) << m.status().message();

  job = JobLayout::Uniform(t, 1, 2);
  job.local_rank_of.pop_back();
  m = BuildLinkModel(job);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);

  // bound_package may be empty, but not of another length than the ranks.
  job = JobLayout::Uniform(t, 1, 2);
  job.bound_package = {0};
  m = BuildLinkModel(job);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument) << m.status().message();

  // A package the node does not have.
  job = JobLayout::Uniform(t, 1, 2);
  job.bound_package = {0, 2};
  m = BuildLinkModel(job);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(m.status().message(), "rank 1")) << m.status().message();
}

}  // namespace
}  // namespace kolo
