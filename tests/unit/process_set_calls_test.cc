// The process-set calls' agreement (runtime/world/process_set_calls.h): the row encoding, the
// description of who called what, and the exchange through whole Runtimes in the thread world:
// equal calls agree, different calls are seen by every rank, and a rank that waits for another
// operation instead ends the exchange on every rank within seconds (the deadlock check).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "runtime/world/process_set_calls.h"
#include "unit/thread_world.h"

namespace kolo::capi {
namespace {

ProcessSetCall Add(std::vector<int> ranks) {
  ProcessSetCall c;
  c.ranks = std::move(ranks);
  return c;
}

ProcessSetCall Remove(int id) {
  ProcessSetCall c;
  c.kind = ProcessSetCall::kRemove;
  c.id = id;
  return c;
}

ProcessSetCall Invalid() {
  ProcessSetCall c;
  c.valid = false;
  return c;
}

TEST(ProcessSetCallsTest, RowsRoundTrip) {
  for (const ProcessSetCall& c : {Add({0, 2}), Add({0, 1, 2}), Remove(7), Invalid(), Add({})}) {
    const std::vector<int32_t> row = EncodeCall(c, 3);
    ASSERT_EQ(row.size(), 5u);
    EXPECT_EQ(DecodeCall(row.data(), 3), c) << c.ToString();
  }
  // A list longer than the world cannot be valid anywhere: it crosses as an invalid one.
  EXPECT_EQ(DecodeCall(EncodeCall(Add({0, 1, 2, 3}), 3).data(), 3), Invalid());
}

TEST(ProcessSetCallsTest, DescribesWhoCalledWhat) {
  EXPECT_EQ(DescribeDifferences({Remove(1), Remove(1), Remove(1)}), "");
  EXPECT_EQ(DescribeDifferences({Remove(1), Remove(2), Remove(2)}),
            "rank 0 removes 1, ranks 1,2 remove 2");
  EXPECT_EQ(DescribeDifferences({Add({1, 2}), Add({0, 1, 2}), Invalid()}),
            "rank 0 passed [1,2], rank 1 passed [0,1,2], rank 2 passed an invalid list");
  EXPECT_EQ(DescribeDifferences({Remove(1), Remove(1), Add({0, 1})}),
            "ranks 0,1 called remove_process_set(1), rank 2 called add_process_set([0,1])");
}

class ProcessSetExchangeTest : public ::testing::TestWithParam<int> {};

TEST_P(ProcessSetExchangeTest, EveryRankSeesEveryCall) {
  const int n = GetParam();
  testing::RunRuntimes(n, testing::FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    auto same = ExchangeCalls(rt, Remove(3));
    ASSERT_TRUE(same.ok()) << same.status().ToString();
    EXPECT_EQ(*same, std::vector<ProcessSetCall>(n, Remove(3)));
    // Rank r adds [0..r]: every rank sees each rank's own list.
    std::vector<int> mine;
    for (int r = 0; r <= rank; ++r) mine.push_back(r);
    auto differ = ExchangeCalls(rt, Add(mine));
    ASSERT_TRUE(differ.ok()) << differ.status().ToString();
    for (int r = 0; r < n; ++r) {
      std::vector<int> theirs;
      for (int i = 0; i <= r; ++i) theirs.push_back(i);
      EXPECT_EQ((*differ)[r], Add(theirs)) << "rank " << r << " seen from rank " << rank;
    }
  });
}

TEST_P(ProcessSetExchangeTest, ARankWaitingForAnotherOperationEndsItEverywhere) {
  const int n = GetParam();
  testing::RunRuntimes(n, testing::FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    const auto start = std::chrono::steady_clock::now();
    if (rank == n - 1) {
      float x = 1;
      auto h = rt.Enqueue(testing::HostAllreduce("other", &x, &x, DataType::kFloat32, {1}, ReduceOp::kSum));
      ASSERT_TRUE(h.ok()) << h.status().ToString();
      const Status s = (*h)->Wait();
      EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
      EXPECT_NE(s.message().find(kProcessSetCallsName), std::string::npos) << s.ToString();
    } else {
      auto calls = ExchangeCalls(rt, Remove(1));
      ASSERT_FALSE(calls.ok());
      EXPECT_NE(calls.status().message().find("deadlock"), std::string::npos)
          << calls.status().ToString();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
    // The next exchange works.
    auto again = ExchangeCalls(rt, Remove(2));
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(*again, std::vector<ProcessSetCall>(n, Remove(2)));
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, ProcessSetExchangeTest, ::testing::Values(2, 3));

}  // namespace
}  // namespace kolo::capi
