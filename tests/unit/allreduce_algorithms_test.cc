// Tier 1 of every all-reduce algorithm in the registry: every dtype x op x count at 1, 2, 3,
// 4, 5 and 7 ranks in the thread world, in place and out of place, against float64 references
// (algorithm_check.h); random float32 sums must be bitwise equal on every rank. The
// hierarchical and shared-memory algorithms get a node context: one node here, and the
// groupings 2x2, 3+2, 1+3 and 2x3 in HierarchicalGroupings.
//
// KOLO_ALGO_TEST_CASES=bytes narrows the matrix to one dtype per element size (1, 2, 4 and 8
// bytes) with Sum, as in tests/mpi/algorithms_main.cc: the sanitizer stages run it so
// (scripts/sanitize.sh). What a sanitizer can find in an algorithm (its buffers, offsets and
// threads) depends on the element size and the count, not on which kernel reduces; the whole
// kernel matrix runs there in ReduceIntoTest and ThreadWorld/AllreduceEveryDtypeOp.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "collectives/native_allreduce.h"
#include "collectives/select/registry.h"
#include "unit/algorithm_check.h"
#include "unit/thread_world.h"

namespace kolo::testing {
namespace {

// What the thread world's communicators will describe for `grouping` ("1" = one node).
SelectionInput ThreadWorldInput(int ranks, const std::string& grouping) {
  auto map = grouping == "1" ? NodeMap::OneNode(ranks) : *NodeMap::Parse(grouping, ranks);
  SelectionInput in;
  in.ranks = ranks;
  in.backend = "loopback";
  in.nodes = map.nodes();
  in.max_local_size = map.max_local_size();
  in.min_local_size = map.min_local_size();
  in.has_node_context = true;
  in.shm_capable = true;
  in.count = 1024;
  in.bytes = 4096;
  return in;
}

int RanksOf(const std::string& grouping) {
  if (grouping == "2x2" || grouping == "1+3") return 4;
  if (grouping == "3+2") return 5;
  if (grouping == "2x3") return 6;
  if (grouping == "1+1+1") return 3;
  return 0;
}

// (algorithm, ranks, grouping) triples, split by whether the algorithm takes that layout.
struct Layout {
  std::string name;
  int ranks;
  std::string grouping;
};
std::vector<Layout> Layouts(bool runnable) {
  std::vector<Layout> out;
  CostModel cost;
  std::vector<std::pair<int, std::string>> layouts;
  for (int ranks : {1, 2, 3, 4, 5, 7}) layouts.emplace_back(ranks, "1");
  for (const char* g : {"2x2", "3+2", "1+3", "2x3", "1+1+1"}) layouts.emplace_back(RanksOf(g), g);
  for (const auto& algo : MakeAllreduceAlgorithms()) {
    for (const auto& [ranks, grouping] : layouts) {
      SelectionInput in = ThreadWorldInput(ranks, grouping);
      in.cost = &cost;
      if (algo->Supports(in).ok() == runnable) {
        out.push_back({std::string(algo->Name()), ranks, grouping});
      }
    }
  }
  return out;
}

std::string LayoutLabel(const Layout& l) {
  std::string s = l.name + "_np" + std::to_string(l.ranks);
  if (l.grouping != "1") {
    s += "_";
    for (char c : l.grouping) s += (c == '+' ? 'p' : c);
  }
  return s;
}

bool BytesCasesOnly() {
  const char* cases = std::getenv("KOLO_ALGO_TEST_CASES");
  return cases != nullptr && std::strcmp(cases, "bytes") == 0;
}

std::vector<DataType> CaseDtypes() {
  if (BytesCasesOnly()) {
    return {DataType::kInt8, DataType::kFloat16, DataType::kFloat32, DataType::kFloat64};
  }
  return AllAlgorithmDtypes();
}

std::vector<ReduceOp> CaseOps() {
  if (BytesCasesOnly()) return {ReduceOp::kSum};
  return KernelOps();
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
    for (DataType t : CaseDtypes()) {
      for (ReduceOp op : CaseOps()) {
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

// Every algorithm on every rank count (one node) and grouping it takes: every dtype x op x
// count against the reference.
class AllreduceAlgorithmTest : public ::testing::TestWithParam<Layout> {};

TEST_P(AllreduceAlgorithmTest, EveryDtypeOpCountMatchesReference) {
  const Layout& l = GetParam();
  Outcome out;
  RunAllCases(l.name, l.ranks, l.grouping, &out);
  for (const std::string& f : out.failures) ADD_FAILURE() << f;
  EXPECT_GT(out.ran, 0u) << l.name << " took the layout for float32 but ran no case: "
                         << out.a_declined_why;
}

INSTANTIATE_TEST_SUITE_P(All, AllreduceAlgorithmTest, ::testing::ValuesIn(Layouts(true)),
                         [](const auto& info) { return LayoutLabel(info.param); });

// RunScaled on every algorithm and layout (CheckRunScaled): bit for bit Run then ScaleCopy
// where the algorithm scales in its own pass, a refusal on every rank where it does not.
class RunScaledTest : public ::testing::TestWithParam<Layout> {};

TEST_P(RunScaledTest, IsRunThenScaleCopyBitForBitOrRefused) {
  const Layout& l = GetParam();
  Outcome out;
  RunOnThreadWorld(l.ranks, l.grouping, [&](Communicator& comm) {
    auto table = MakeAllreduceAlgorithms();
    AllreduceAlgorithm* algo = nullptr;
    for (auto& a : table) {
      if (a->Name() == l.name) algo = a.get();
    }
    ASSERT_NE(algo, nullptr);
    for (DataType t : {DataType::kFloat32, DataType::kFloat64}) {
      for (size_t count : {size_t{1}, size_t{5}, size_t{1000}, size_t{65537}}) {
        for (double factor : {1.0 / l.ranks, 0.5, 1.0}) {
          for (bool in_place : {false, true}) {
            const std::string f = CheckRunScaled(comm, *algo, t, count, in_place, factor);
            if (!f.empty()) out.Fail(f);
          }
        }
      }
    }
  });
  for (const std::string& f : out.failures) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(All, RunScaledTest, ::testing::ValuesIn(Layouts(true)),
                         [](const auto& info) { return LayoutLabel(info.param); });

// The layouts an algorithm declines (shm on several nodes, hierarchical on one): it says why,
// and auto selection still finds another algorithm for every dtype and op, so nothing fails.
TEST(AllreduceAlgorithmDeclines, WithAReasonAndAutoFindsAnother) {
  const std::vector<Layout> declined = Layouts(false);
  EXPECT_FALSE(declined.empty());  // shm on several nodes, hierarchical on one, at least
  AllreduceSelector selector;
  for (const Layout& l : declined) {
    SelectionInput in = ThreadWorldInput(l.ranks, l.grouping);
    CostModel cost;
    in.cost = &cost;
    AllreduceAlgorithm* algo = selector.Find(l.name);
    ASSERT_NE(algo, nullptr);
    Status why = algo->Supports(in);
    EXPECT_EQ(why.code(), StatusCode::kUnimplemented) << LayoutLabel(l);
    EXPECT_FALSE(why.message().empty()) << LayoutLabel(l);
    for (ReduceOp op : KernelOps()) {
      in.op = op;
      auto picked = selector.Select(in);
      EXPECT_TRUE(picked.ok()) << LayoutLabel(l) << ": " << picked.status().ToString();
    }
  }
}

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

// A transport that only moves bytes (UCX) has no library all-reduce: the library entry declines
// it by the communicator's capability, whatever its name, and the cost model picks one of
// kolo's algorithms; with native collectives the library entry stays a candidate.
TEST(SelectorTest, WithoutNativeCollectivesTheLibraryAllreduceIsNotPicked) {
  AllreduceSelector selector("", CostModel());
  for (size_t bytes : {size_t{8}, size_t{1} << 20, size_t{64} << 20}) {
    SelectionInput in = ThreadWorldInput(4, "1");
    in.bytes = bytes;
    in.count = bytes / 4;
    in.backend = "bytes-only";
    in.native_collectives = false;
    auto picked = selector.Select(in);
    ASSERT_TRUE(picked.ok()) << picked.status().ToString();
    EXPECT_NE((*picked)->Name(), "mpi") << bytes << " bytes";
    bool library_ranked = false;
    for (const auto& [algo, micros] : selector.Rank(in)) {
      if (algo->Name() == "mpi") library_ranked = micros >= 0;
    }
    EXPECT_FALSE(library_ranked) << bytes << " bytes";
    in.native_collectives = true;
    for (const auto& [algo, micros] : selector.Rank(in)) {
      if (algo->Name() == "mpi") library_ranked = micros >= 0;
    }
    EXPECT_TRUE(library_ranked) << bytes << " bytes";
  }
  NativeAllreduce native;
  SelectionInput in = ThreadWorldInput(2, "1");
  in.backend = "bytes-only";
  in.native_collectives = false;
  const Status s = native.Supports(in);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("the bytes-only backend has no native all-reduce"), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace kolo::testing
