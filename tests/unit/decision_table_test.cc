// The selector's choices from a topology: fixture -> link model
// -> cost model -> decision table, for host and device buffers. Every expected choice is
// reasoned from the cost formulas (collectives/nccl/*.h, collectives/ALGORITHMS.md) and the
// link defaults in a comment; the times that decide it are recomputed here from those
// formulas, independently of the implementation.
#include "collectives/select/decision_table.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "collectives/select/registry.h"
#include "collectives/select/topology_cost.h"
#include "tests/unit/topology_fixtures.h"
#include "topology/link_defaults.h"

namespace kolo {
namespace {

using testing_topology::Fixture;

CostModel CostOf(const std::string& fixture, int nodes, int ranks_per_node) {
  const auto& t = Fixture(fixture);
  EXPECT_TRUE(t.ok()) << fixture;
  if (!t.ok()) return CostModel();
  auto links = BuildLinkModel(JobLayout::Uniform(*t, nodes, ranks_per_node));
  EXPECT_TRUE(links.ok());
  return links.ok() ? CostModelFromLinks(*links) : CostModel();
}

Decision At(const std::vector<Decision>& table, size_t bytes) {
  for (const Decision& d : table) {
    if (d.bytes == bytes) return d;
  }
  ADD_FAILURE() << "no row for " << bytes << " bytes";
  return Decision();
}

constexpr size_t k8B = 8;
constexpr size_t k128MiB = size_t{128} << 20;

CostModel CostOfTopology(const Topology& t, int nodes, int ranks_per_node) {
  auto links = BuildLinkModel(JobLayout::Uniform(t, nodes, ranks_per_node));
  EXPECT_TRUE(links.ok());
  return links.ok() ? CostModelFromLinks(*links) : CostModel();
}

// The H100 fixture with only its first 400 Gbit/s port: NVSwitch nodes with a slow way out.
Topology OnePortH100() {
  const auto& full = Fixture("h100-nvswitch-8gpu.xml");
  EXPECT_TRUE(full.ok());
  Topology t = full.ok() ? *full : Topology();
  t.nics.resize(1);
  for (PcieSwitch& s : t.switches) {
    s.nics.erase(std::remove_if(s.nics.begin(), s.nics.end(), [](int n) { return n >= 1; }),
                 s.nics.end());
  }
  return t;
}

// Links of the H100 fixture: GPU-GPU 18 NVLink4 links x 20.6 GB/s (NCCL's SM90 rate) = 370.8
// GB/s, 0.5 us a hop; one 400 Gbit/s port = 400/8 x 0.96 = 48 GB/s, 2 us (InfiniBand), 3 us
// from a GPU on the other package (staged through host memory: one PCIe hop more).
//
// With one port per node, its 8 GPUs share it: 6 GB/s each. 2 nodes x 8, 128 MiB:
//   flat ring: 2(15/16) n / min(370.8, 8 x 6 = 48 GB/s)              ~ 0.0391 us/B x n
//   hierarchical: 2(7/8) n / 370.8 + 2(1/2)(n/8) / 6 GB/s            ~ 0.0256 us/B x n
// -> nccl_hierarchical, by ~1.5x (the 2x bound of 2 nodes, less its in-node passes), NCCL's
// own all-reduce the runner-up at its ring's time. At 8 B its tree's 6.6 + 2 (log2 2 x 3 +
// 7 x 0.5) = 19.6 us beats hierarchical's three start-ups plus its hops (> 19.8 us) and its
// ring's 30 steps of 3 us -> nccl, at the tree's time (alpha_net = 3 us, the slowest GPU's).
TEST(DecisionTable, NvswitchNodesWithSlowerNicsPickHierarchicalForLargeMessages) {
  const CostModel cost = CostOfTopology(OnePortH100(), 2, 8);
  const double nv = 18 * NvlinkAchievableGbpsPerLink(4) * 1000;  // bytes per us
  const double share = 400.0 / 8 * kNicEfficiency / 8 * 1000;
  EXPECT_NEAR(1 / cost.device_intra.beta_us, nv, 1e-6);
  EXPECT_NEAR(1 / cost.device_inter.beta_us, share, 1e-6);
  const double a = NicAlphaUs(NicKind::kInfiniBand) + kPcieHopUs;
  EXPECT_DOUBLE_EQ(cost.device_inter.alpha_us, a);
  const auto table = MakeDecisionTable(cost, 2, 8, MemoryKind::kCuda, DecisionSizes());

  const double n = static_cast<double>(k128MiB);
  const double hier = 3 * 6.6 + 2 * 7 * (kNvlinkHopUs + n / 8 / nv) +
                      std::min(2 * 1 * (a + n / 16 / share), 2 * 1 * a + 2 * (n / 8) / share);
  const double ring = 6.6 + 2 * 15 * (a + n / 16 * std::max(1 / nv, 1 / (8 * share)));
  const Decision big = At(table, k128MiB);
  EXPECT_EQ(big.best, "nccl_hierarchical");
  EXPECT_NEAR(big.best_us, hier, 1e-6 * hier);
  EXPECT_EQ(big.runner_up, "nccl");
  EXPECT_NEAR(big.runner_up_us, ring, 1e-6 * ring);
  EXPECT_LT(hier * 1.4, ring);  // the margin the topology gives it, not a tie

  const Decision small = At(table, k8B);
  EXPECT_EQ(small.best, "nccl");
  EXPECT_NEAR(small.best_us, 6.6 + 2 * (1 * a + 7 * kNvlinkHopUs), 1e-3);
  // Still hierarchical at 4 nodes, by less ((31/32) / (3/4) at most).
  const auto four = MakeDecisionTable(CostOfTopology(OnePortH100(), 4, 8), 4, 8,
                                      MemoryKind::kCuda, DecisionSizes());
  EXPECT_EQ(At(four, k128MiB).best, "nccl_hierarchical");
}

// The full fixture, a 400 Gbit/s port per GPU: the node's NICs together (8 x 48 = 384 GB/s)
// are as fast as NVLink, so NCCL's ring, which runs a channel per port, moves 2(31/32) n at
// 370.8 GB/s, and hierarchical only adds its in-node passes (2(7/8) n / 370.8 + 2(3/4) n / 384
// ~ 1.65x the ring): it is never chosen from 2 MiB up. At 1 GiB the ring's 62 start-ups of
// 2 us are paid off and its 2(31/32) n beats the tree's 2n -> nccl, at the ring's time.
TEST(DecisionTable, RailOptimizedNvswitchNodesKeepNcclsFlatAlgorithms) {
  const CostModel cost = CostOf("h100-nvswitch-8gpu.xml", 4, 8);
  const auto table = MakeDecisionTable(cost, 4, 8, MemoryKind::kCuda, DecisionSizes());
  for (const Decision& d : table) {
    if (d.bytes >= (size_t{2} << 20)) {
      EXPECT_NE(d.best, "nccl_hierarchical") << d.bytes;
    }
  }
  const double nv = 18 * NvlinkAchievableGbpsPerLink(4) * 1000;
  const double n = static_cast<double>(size_t{1} << 30);
  const Decision big = At(table, size_t{1} << 30);
  EXPECT_EQ(big.best, "nccl");
  EXPECT_NEAR(big.best_us, 6.6 + 2 * 31 * (2.0 + n / 32 / nv), 1e-3);
  EXPECT_EQ(big.runner_up, "nccl_hierarchical");
}

// One PCIe node of 4 GPUs: NCCL's trees span nodes and hierarchical needs several, so NCCL's
// all-reduce, predicted as its ring, is the only device candidate at every size; for host buffers
// one node means shared memory (one barrier and a copy: far below rd's log2(4) = 2 shm
// point-to-point steps of 1 us).
TEST(DecisionTable, OnePcieNodePicksTheRingOnDevicesAndSharedMemoryOnHosts) {
  const CostModel cost = CostOf("pcie-gen4-2s-4gpu.xml", 1, 4);
  for (const Decision& d : MakeDecisionTable(cost, 1, 4, MemoryKind::kCuda, DecisionSizes())) {
    EXPECT_EQ(d.best, "nccl") << d.bytes;
    EXPECT_EQ(d.runner_up, "") << d.bytes;
  }
  const auto host = MakeDecisionTable(cost, 1, 4, MemoryKind::kHost, DecisionSizes());
  EXPECT_EQ(At(host, k8B).best, "shm");
  EXPECT_EQ(At(host, k8B).runner_up, "rd");
}

// 4 PCIe nodes x 4 ranks, host buffers, all four ranks of a node on the one 200 Gbit/s HCA:
// 8 B by recursive doubling: log2(16) = 4 steps, the first two (partners 1 and 2 apart) inside
// the node at alpha_intra = 1.5 us, the last two across at alpha_IB = 2 us: 7 us. Hierarchical
// pays the cross-node step that its phase 2 runs, recursive doubling over the 4 nodes (2 steps,
// 4 us, on one 4-byte slice per owner), and inside the node two shared-memory barriers (0.5 us
// each) instead of rd's two 1.5 us steps: 5 us.
TEST(DecisionTable, SmallHostMessagesAcrossNodesPickHierarchicalOverRecursiveDoubling) {
  const CostModel cost = CostOf("pcie-gen4-2s-4gpu.xml", 4, 4);
  EXPECT_DOUBLE_EQ(cost.inter.alpha_us, NicAlphaUs(NicKind::kInfiniBand));
  EXPECT_DOUBLE_EQ(cost.intra.alpha_us, 1.5);
  const auto host = MakeDecisionTable(cost, 4, 4, MemoryKind::kHost, DecisionSizes());
  const Decision d = At(host, k8B);
  EXPECT_EQ(d.runner_up, "rd");
  EXPECT_NEAR(d.runner_up_us,
              2 * (cost.intra.alpha_us + k8B * cost.intra.beta_us) +
                  2 * (2.0 + k8B * cost.inter.beta_us) + 4 * k8B * cost.gamma_us,
              0.05);
  EXPECT_EQ(d.best, "hierarchical");
  const double slice = 4;  // 2 floats over 4 owners: at most one each
  const double intra = 2 * k8B * cost.copy_us + 3 * k8B / 4 * cost.gamma_us + 2 * cost.sync_us;
  const double cross = 2 * (2.0 + slice * cost.inter.beta_us) + 2 * slice * cost.gamma_us;
  EXPECT_NEAR(d.best_us, intra + cross, 0.05);
}

// 4 CPU nodes x 8 ranks sharing one 25 GbE RoCE port: each rank's share is 25/8 x 0.96 / 8 =
// 0.375 GB/s. Hierarchical's cross step sends a slice per local rank, all 8 at once: 2(3/4)(n/8)
// per rank at 0.375 GB/s ~ 67 ms at 128 MiB, plus shared-memory phases at 5 GB/s. Of the flat
// algorithms, the ring over ranks placed by node has one flow per node across, at the whole
// port's 3 GB/s (~85 ms); the others cross with every rank at once (> 500 ms).
TEST(DecisionTable, CpuNodesBehindOneSlowPortPickHierarchical) {
  const CostModel cost = CostOf("cpu-2s.xml", 4, 8);
  EXPECT_NEAR(1 / cost.inter.beta_us, 25.0 / 8 * kNicEfficiency / 8 * 1000, 1e-6);
  const auto host = MakeDecisionTable(cost, 4, 8, MemoryKind::kHost, DecisionSizes());
  EXPECT_EQ(cost.inter_sharing, 8);  // the one port, shared by the node's 8 ranks
  const Decision d = At(host, k128MiB);
  EXPECT_EQ(d.best, "hierarchical");
  // Per node across: hierarchical 2(n-1)/n S = 1.5 S, all 8 ranks at once; the ring over ranks
  // placed by node 2(p-1)/p S = 1.94 S, one flow with the port to itself. Both at the port's
  // rate: hierarchical takes 1.5 / 1.94 = 0.77 of the ring's time, plus its copies in the node.
  EXPECT_EQ(d.runner_up, "ring");
  EXPECT_LT(d.best_us, 0.85 * d.runner_up_us);
  EXPECT_GT(d.best_us, 0.77 * d.runner_up_us);
  EXPECT_TRUE(MakeDecisionTable(cost, 4, 8, MemoryKind::kCuda, DecisionSizes())[0].best ==
              "nccl");  // device candidates are ranked even where there is no GPU
}

// Hierarchical remembers phase 2's choice per slice. 2 nodes x 2 ranks and 2 nodes x 1 rank
// with half the message give phase 2 the same slice (one piece, 64 KiB floats over 2 owners or
// 1), but two owners cross at once (each flow gets its share of the link: inter) and one crosses
// alone (inter_sharing times faster): the two must be priced apart, whichever was priced first.
TEST(DecisionTable, HierarchicalPricesPhaseTwoByHowManySlicesCrossAtOnce) {
  CostModel cost;
  cost.inter_sharing = 2;
  auto estimate = [&](const std::vector<std::unique_ptr<AllreduceAlgorithm>>& table,
                      int ranks_per_node, size_t count) {
    SelectionInput in;
    in.count = count;
    in.bytes = count * sizeof(float);
    in.ranks = 2 * ranks_per_node;
    in.nodes = 2;
    in.min_local_size = in.max_local_size = ranks_per_node;
    in.has_node_context = in.shm_capable = true;
    in.backend = "mpi";
    in.cost = &cost;
    for (const auto& algo : table) {
      if (algo->Name() == "hierarchical") return algo->EstimateMicros(in);
    }
    ADD_FAILURE() << "no hierarchical";
    return 0.0;
  };
  constexpr size_t kCount = 32768;  // 128 KiB: one piece
  const auto one_first = MakeAllreduceAlgorithms(std::make_shared<const CostModel>(cost));
  const double alone = estimate(one_first, 1, kCount / 2);
  const double shared = estimate(one_first, 2, kCount);
  const auto two_first = MakeAllreduceAlgorithms(std::make_shared<const CostModel>(cost));
  EXPECT_DOUBLE_EQ(estimate(two_first, 2, kCount), shared);
  EXPECT_DOUBLE_EQ(estimate(two_first, 1, kCount / 2), alone);
  // Shared, every flat algorithm moves the 64 KiB slice at inter's rate (the ring: 2 (1/2) slice);
  // alone the ring's one flow runs inter_sharing = 2 times faster: (1/2) slice x beta apart, and
  // more with the second owner's in-node share.
  const double slice = kCount / 2 * sizeof(float);
  EXPECT_GT(shared - alone, 0.5 * slice * cost.inter.beta_us);
}

// busbw = bytes / time x 2(p-1)/p (nccl-tests), from the chosen time.
TEST(DecisionTable, BusBandwidthFollowsNcclTests) {
  const CostModel cost = CostOf("h100-nvswitch-8gpu.xml", 2, 8);
  for (const Decision& d : MakeDecisionTable(cost, 2, 8, MemoryKind::kCuda, DecisionSizes())) {
    EXPECT_NEAR(d.busbw_gbps, d.bytes / (d.best_us * 1000.0) * 2.0 * 15 / 16, 1e-9);
  }
  EXPECT_EQ(DecisionSizes().front(), 8u);
  EXPECT_EQ(DecisionSizes().back(), size_t{1} << 30);
}

// Host and device candidates never mix: auto picks only algorithms of the input's memory kind,
// and a forced algorithm of the other kind fails with the reason.
TEST(DecisionTable, MemoryKindsDoNotMix) {
  SelectionInput in = JobSelectionInput(1 << 20, 2, 4, MemoryKind::kCuda);
  AllreduceSelector selector;
  auto picked = selector.Select(in);
  ASSERT_TRUE(picked.ok()) << picked.status().ToString();
  EXPECT_EQ((*picked)->memory(), MemoryKind::kCuda);
  in.memory = MemoryKind::kHost;
  picked = selector.Select(in);
  ASSERT_TRUE(picked.ok());
  EXPECT_EQ((*picked)->memory(), MemoryKind::kHost);
  AllreduceSelector forced("nccl");
  auto refused = forced.Select(in);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("runs on cuda buffers"), std::string::npos)
      << refused.status().message();
}

// A tuning file read over the topology's model replaces only what it names: a calibration
// (host figures) keeps the topology's device links.
TEST(DecisionTable, TuningFileOverridesOnlyWhatItNames) {
  const CostModel topo = CostOf("h100-nvswitch-8gpu.xml", 2, 8);
  const std::string path =
      ::testing::TempDir() + "kolo_tuning_partial_" + std::to_string(getpid()) + ".json";
  {
    std::ofstream out(path);
    out << R"({"intra": {"alpha_us": 0.7, "beta_us": 0.0002}})";
  }
  auto loaded = CostModel::Load(path, topo);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_DOUBLE_EQ(loaded->intra.alpha_us, 0.7);
  EXPECT_DOUBLE_EQ(loaded->intra.beta_us, 0.0002);
  EXPECT_DOUBLE_EQ(loaded->device_intra.beta_us, topo.device_intra.beta_us);
  EXPECT_DOUBLE_EQ(loaded->inter.beta_us, topo.inter.beta_us);
  EXPECT_NE(loaded->source.find("over topology"), std::string::npos) << loaded->source;
  EXPECT_DOUBLE_EQ(loaded->inter_sharing, topo.inter_sharing);
  // What a calibration saves holds no device figure, so it cannot undo the topology's.
  ASSERT_TRUE(loaded->Save(path).ok());
  std::ifstream in(path);
  const std::string saved((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(saved.find("device_"), std::string::npos) << saved;
  std::remove(path.c_str());
}

// inter_sharing and inter_duplex round-trip through a tuning file; less than 1 is refused,
// naming the key; a file without inter_duplex (written before it existed) keeps 1.
TEST(DecisionTable, TuningFileCarriesInterSharingAndDuplex) {
  const std::string path =
      ::testing::TempDir() + "kolo_tuning_sharing_" + std::to_string(getpid()) + ".json";
  CostModel m;
  m.inter_sharing = 2.5;
  m.inter_duplex = 1.16;
  ASSERT_TRUE(m.Save(path).ok());
  auto loaded = CostModel::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_DOUBLE_EQ(loaded->inter_sharing, 2.5);
  EXPECT_DOUBLE_EQ(loaded->inter_duplex, 1.16);
  for (const char* key : {"inter_sharing", "inter_duplex"}) {
    {
      std::ofstream out(path);
      out << "{\"" << key << "\": 0.5}";
    }
    auto bad = CostModel::Load(path);
    ASSERT_FALSE(bad.ok()) << key;
    EXPECT_NE(bad.status().message().find(key), std::string::npos) << bad.status().ToString();
  }
  {
    std::ofstream out(path);
    out << R"({"inter_sharing": 2})";
  }
  auto old = CostModel::Load(path);
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_DOUBLE_EQ(old->inter_duplex, 1.0);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace kolo
