// Every rank derives the same topology, link model, cost model and choices: the
// exchange of kolo_init (collectives/mpi/mpi_topology.h) under mpirun, then each rank's
// derivation compared with every other rank's, and with what each node's leader loaded.
//
// Its own main: any rank's failure fails the test on every rank (a failure flag is gathered
// at the end of each test), and the exit status is the same everywhere.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "collectives/mpi/mpi_node.h"
#include "collectives/mpi/mpi_topology.h"
#include "collectives/select/decision_table.h"
#include "collectives/select/topology_cost.h"
#include "mpi/gtest_mpi.h"
#include "topology/hwloc_topology.h"
#include "topology/topology_json.h"

#ifndef KOLO_FIXTURE_DIR
#error "KOLO_FIXTURE_DIR must name tests/fixtures/topologies"
#endif

namespace kolo::testing {
namespace {

int Rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int Size() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

// Fails the test on every rank when any rank failed it.
void AgreeOnFailure() {
  int mine = ::testing::Test::HasFailure() ? 1 : 0, any = 0;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any && !mine) ADD_FAILURE() << "failed on another rank (see its stderr)";
}

// Everything a rank derives from the exchange, as one string to compare across ranks.
std::string Derivation(const JobTopology& job) {
  std::string out;
  for (const Topology& t : job.layout.nodes) out += TopologyToJson(t) + "\n";
  auto links = BuildLinkModel(job.layout);
  if (!links.ok()) return "link model failed: " + links.status().ToString();
  const CostModel cost = CostModelFromLinks(*links);
  out += cost.ToJson() + "\n";
  int local = 0;
  for (int l : job.layout.local_rank_of) local = std::max(local, l + 1);
  for (MemoryKind m : {MemoryKind::kHost, MemoryKind::kCuda}) {
    for (const Decision& d : MakeDecisionTable(cost, static_cast<int>(job.layout.nodes.size()),
                                               local, m, DecisionSizes())) {
      out += d.best + "/" + d.runner_up + " ";
    }
  }
  return out;
}

// Every rank's string must equal rank 0's.
void ExpectSameOnEveryRank(const std::string& mine, const char* what) {
  std::vector<std::string> all;
  ASSERT_TRUE(GatherStrings(MPI_COMM_WORLD, mine, &all).ok());
  for (size_t r = 1; r < all.size(); ++r) {
    EXPECT_EQ(all[r], all[0]) << what << ": rank " << r << " differs from rank 0";
  }
}

TEST(TopologyExchangeTest, EveryRankDerivesTheSameFromThisMachine) {
  const NodeMap map = NodeMap::OneNode(Size());
  auto job = ExchangeTopologies(MPI_COMM_WORLD, map, "", false);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  ASSERT_TRUE(job->available) << job->why;
  ASSERT_EQ(job->layout.nodes.size(), 1u);
  // The leader's discovery matches this rank's own (same machine, same hwloc).
  auto own = DiscoverTopology();
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  EXPECT_EQ(job->layout.nodes[0].packages.size(), own->packages.size());
  EXPECT_EQ(job->layout.nodes[0].cores, own->cores);
  EXPECT_EQ(job->layout.nodes[0].gpus.size(), own->gpus.size());
  EXPECT_FALSE(job->layout.simulated_nodes);
  ExpectSameOnEveryRank(Derivation(*job), "derivation from this machine");
  AgreeOnFailure();
}

// Two simulated nodes whose leaders load different machines (an 8-GPU NVSwitch node and a
// 4-GPU PCIe node): every rank must still see both, in node order, and agree on everything.
TEST(TopologyExchangeTest, HeterogeneousNodesAgreeEverywhere) {
  const int size = Size();
  if (size < 2) GTEST_SKIP() << "needs 2 ranks";
  auto map = NodeMap::Parse(std::to_string(size / 2) + "+" + std::to_string(size - size / 2),
                            size);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  const int node = map->node_of_rank[Rank()];
  const std::string xml = std::string(KOLO_FIXTURE_DIR) +
                          (node == 0 ? "/h100-nvswitch-8gpu.xml" : "/pcie-gen4-2s-4gpu.xml");
  auto job = ExchangeTopologies(MPI_COMM_WORLD, *map, xml, true);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  ASSERT_EQ(job->layout.nodes.size(), 2u);
  EXPECT_EQ(job->layout.nodes[0].gpus.size(), 8u);
  EXPECT_EQ(job->layout.nodes[1].gpus.size(), 4u);
  // Both fixtures name their host differently, so these are not simulated nodes.
  EXPECT_FALSE(job->layout.simulated_nodes);
  auto links = BuildLinkModel(job->layout);
  ASSERT_TRUE(links.ok());
  EXPECT_FALSE(links->homogeneous);
  EXPECT_TRUE(links->multi_node);
  // The job's GPU bottleneck is the PCIe node's: the link model of node 1 alone gives it.
  auto pcie = LoadTopologyXml(std::string(KOLO_FIXTURE_DIR) + "/pcie-gen4-2s-4gpu.xml");
  ASSERT_TRUE(pcie.ok());
  auto alone = BuildLinkModel(JobLayout::Uniform(*pcie, 1, size - size / 2));
  ASSERT_TRUE(alone.ok());
  if (size - size / 2 > 1) {
    EXPECT_DOUBLE_EQ(links->intra_device.gbps, alone->intra_device.gbps);
  }
  ExpectSameOnEveryRank(Derivation(*job), "derivation from two fixtures");
  AgreeOnFailure();
}

// A node whose KOLO_TOPOLOGY_XML is missing fails every rank with the same message naming it.
TEST(TopologyExchangeTest, AMissingXmlOnOneNodeFailsEveryRankAlike) {
  const int size = Size();
  if (size < 2) GTEST_SKIP() << "needs 2 ranks";
  auto map = NodeMap::Parse("1+" + std::to_string(size - 1), size);
  ASSERT_TRUE(map.ok());
  const int node = map->node_of_rank[Rank()];
  const std::string xml = node == 0 ? std::string(KOLO_FIXTURE_DIR) + "/cpu-2s.xml"
                                    : std::string("/nonexistent/kolo-topology.xml");
  auto job = ExchangeTopologies(MPI_COMM_WORLD, *map, xml, true);
  ASSERT_FALSE(job.ok());
  EXPECT_NE(job.status().message().find("node 1 (rank 1)"), std::string::npos)
      << job.status().message();
  EXPECT_NE(job.status().message().find("/nonexistent/kolo-topology.xml"), std::string::npos)
      << job.status().message();
  ExpectSameOnEveryRank(job.status().message(), "error message");
  AgreeOnFailure();
}

}  // namespace
}  // namespace kolo::testing

int main(int argc, char** argv) {
  int rank = 0, size = 1;
  kolo::testing::StartGtestUnderMpi(&argc, &argv, &rank, &size);
  return kolo::testing::EndGtestUnderMpi(RUN_ALL_TESTS() != 0 ? 1 : 0);
}
