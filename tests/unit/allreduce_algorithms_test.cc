// Tier 1 of every all-reduce algorithm in the registry: every dtype x op x count at 1, 2, 3,
// 4, 5 and 7 ranks in the thread world, in place and out of place, against float64 references
// (algorithm_check.h); random float32 sums must be bitwise equal on every rank. The
// hierarchical and shared-memory algorithms get a node context: one node here, and the
// groupings 2x2, 3+2, 1+3 and 2x3 in HierarchicalGroupings.
#include <gtest/gtest.h>

#include <mutex>

#include "collectives/registry.h"
#include "unit/algorithm_check.h"
#include "unit/thread_world.h"

namespace kolo::testing {
namespace {

std::vector<std::string> AlgorithmNames() {
  std::vector<std::string> names;
  for (const auto& a : MakeAllreduceAlgorithms()) names.emplace_back(a->Name());
  return names;
}

// Runs every case on one thread world; returns the failures (at most a few per rank).
struct Outcome {
  std::mutex mu;
  std::vector<std::string> failures;
  size_t ran = 0, declined = 0;
  std::string a_declined_why;
  void Add(const CaseResult& r) {
    std::lock_guard<std::mutex> lock(mu);
    if (!r.ran) {
      ++declined;
      a_declined_why = r.declined_why;
    } else {
      ++ran;
    }
    if (!r.failure.empty() && failures.size() < 20) failures.push_back(r.failure);
  }
  void Fail(const std::string& f) {
    std::lock_guard<std::mutex> lock(mu);
    if (failures.size() < 20) failures.push_back(f);
  }
};

void RunAllCases(const std::string& algo_name, int ranks, std::string_view grouping,
                 Outcome* out) {
  RunOnThreadWorld(ranks, grouping, [&](Communicator& comm) {
    auto table = MakeAllreduceAlgorithms();
    AllreduceAlgorithm* algo = nullptr;
    for (auto& a : table) {
      if (a->Name() == algo_name) algo = a.get();
    }
    ASSERT_NE(algo, nullptr);
    int index = 0;
    for (DataType t : AllAlgorithmDtypes()) {
      for (ReduceOp op : KernelOps()) {
        for (size_t count : AlgorithmCounts(ranks, /*with_large=*/false)) {
          out->Add(CheckAllreduceCase(comm, *algo, t, op, count, (index++ % 2) == 0));
        }
      }
    }
    // 2^20 elements: float32 sum in place and int32 max out of place.
    out->Add(CheckAllreduceCase(comm, *algo, DataType::kFloat32, ReduceOp::kSum, 1 << 20, true));
    out->Add(CheckAllreduceCase(comm, *algo, DataType::kInt32, ReduceOp::kMax, 1 << 20, false));
    for (size_t count : {size_t{1}, size_t{1000}, size_t{65537}}) {
      std::string f = CheckRandomFloat32Sum(comm, *algo, count);
      if (!f.empty()) out->Fail(f);
    }
  });
}

class AllreduceAlgorithmTest
    : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(AllreduceAlgorithmTest, EveryDtypeOpCountMatchesReference) {
  const auto& [name, ranks] = GetParam();
  Outcome out;
  RunAllCases(name, ranks, "1", &out);
  for (const std::string& f : out.failures) ADD_FAILURE() << f;
  if (out.ran == 0) {
    GTEST_SKIP() << name << " declines every case at " << ranks
                 << " ranks on one node: " << out.a_declined_why;
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, AllreduceAlgorithmTest,
    ::testing::Combine(::testing::ValuesIn(AlgorithmNames()),
                       ::testing::Values(1, 2, 3, 4, 5, 7)),
    [](const auto& info) {
      return std::get<0>(info.param) + "_np" + std::to_string(std::get<1>(info.param));
    });

// Multi-node groupings: every algorithm (flat ones ignore the grouping, hierarchical ones use
// it) must still match the reference.
class AllreduceGroupingTest
    : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(AllreduceGroupingTest, MatchesReference) {
  const auto& [name, grouping] = GetParam();
  int ranks = 0;
  if (grouping == "2x2") ranks = 4;
  if (grouping == "3+2") ranks = 5;
  if (grouping == "1+3") ranks = 4;
  if (grouping == "2x3") ranks = 6;
  if (grouping == "1+1+1") ranks = 3;
  ASSERT_GT(ranks, 0);
  Outcome out;
  RunAllCases(name, ranks, grouping, &out);
  for (const std::string& f : out.failures) ADD_FAILURE() << f;
  if (out.ran == 0) {
    GTEST_SKIP() << name << " declines every case on " << grouping << ": "
                 << out.a_declined_why;
  }
}

std::string GroupingLabel(const std::string& g) {
  std::string s;
  for (char c : g) s += (c == '+' ? 'p' : c);
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    All, AllreduceGroupingTest,
    ::testing::Combine(::testing::ValuesIn(AlgorithmNames()),
                       ::testing::Values("2x2", "3+2", "1+3", "2x3", "1+1+1")),
    [](const auto& info) {
      return std::get<0>(info.param) + "_" + GroupingLabel(std::get<1>(info.param));
    });

TEST(NodeMapTest, ParsesTheThreeForms) {
  auto a = NodeMap::Parse("2x2", 4);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->node_of_rank, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(a->local_rank_of, (std::vector<int>{0, 1, 0, 1}));
  auto b = NodeMap::Parse("3+2", 5);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->node_sizes, (std::vector<int>{3, 2}));
  EXPECT_FALSE(b->uniform());
  auto c = NodeMap::Parse("7,3,7,3", 4);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->node_of_rank, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(c->local_rank_of, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(c->Describe(), "2 nodes: 0 2 | 1 3");
}

TEST(NodeMapTest, RejectsWithTheReason) {
  auto a = NodeMap::Parse("3+2", 4);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("covers 5 ranks, the job has 4"), std::string::npos)
      << a.status().message();
  for (const char* bad : {"", "x", "2x", "0x4", "2+0", "a,b", "1,,2", "-1,0"}) {
    auto m = NodeMap::Parse(bad, 4);
    EXPECT_FALSE(m.ok()) << bad;
    if (!m.ok()) {
      EXPECT_NE(m.status().message().find("KOLO_NODE_GROUPING"), std::string::npos);
    }
  }
}

TEST(SelectorTest, ForcedUnknownNameListsTheAlgorithms) {
  AllreduceSelector selector("nonesuch");
  SelectionInput in;
  auto s = selector.Select(in);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("KOLO_ALLREDUCE_ALGO=nonesuch"), std::string::npos);
  EXPECT_NE(s.status().message().find("mpi"), std::string::npos) << s.status().message();
}

}  // namespace
}  // namespace kolo::testing
