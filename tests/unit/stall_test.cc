// The stall inspector: the warning names the tensor, the ranks that have it and the missing
// ranks; the shutdown timer fails the tensor on every rank that submitted it, with the cache on
// (a stalled cache hit must reach the coordinator) and off.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "runtime/negotiation/stall_inspector.h"
#include "unit/thread_world.h"

namespace kolo {
namespace {

using Clock = std::chrono::steady_clock;

RequestList One(OpType op, const std::string& name) {
  RequestList l;
  Request r;
  r.op = op;
  r.name = name;
  r.shape = {4};
  l.requests.push_back(r);
  return l;
}

TEST(StallInspector, WarnsOnceWithTheMissingRanks) {
  Coordinator c(4);
  c.Add(One(OpType::kAllreduce, "grad/fc1"), 0);
  c.Add(One(OpType::kAllreduce, "grad/fc1"), 2);
  c.Add(One(OpType::kBroadcast, "w"), 1);
  StallInspector inspector(StallOptions{true, 60, 0});
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(inspector.Inspect(c, Clock::now() + std::chrono::seconds(30)).empty());
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(inspector.Inspect(c, Clock::now() + std::chrono::seconds(61)).empty());
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("2 tensor(s) submitted by some ranks but not by others for over 60 s"),
            std::string::npos) << log;
  EXPECT_NE(log.find("allreduce 'grad/fc1': submitted by ranks 0,2, missing ranks: 1,3 "
                     "(waiting 6"), std::string::npos) << log;
  EXPECT_NE(log.find("broadcast 'w': submitted by rank 1, missing ranks: 0,2,3"),
            std::string::npos) << log;
  // Reported once, not every check.
  ::testing::internal::CaptureStderr();
  inspector.Inspect(c, Clock::now() + std::chrono::seconds(90));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(c.pending(), 2u);  // a warning takes nothing away
}

TEST(StallInspector, JoinedRanksAreNotMissing) {
  Coordinator c(3);
  c.Add(One(OpType::kJoin, "__kolo_join.0"), 2);
  c.Add(One(OpType::kAllreduce, "a"), 0);
  const auto waiting = c.Pending();
  ASSERT_EQ(waiting.size(), 1u);
  EXPECT_EQ(waiting[0].missing, std::vector<int>{1});
}

TEST(StallInspector, ShutdownTimeFailsTheTensor) {
  Coordinator c(3);
  c.Add(One(OpType::kAllreduce, "a"), 0);
  StallInspector inspector(StallOptions{true, 2, 5});
  ::testing::internal::CaptureStderr();
  auto failed = inspector.Inspect(c, Clock::now() + std::chrono::seconds(6));
  ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].type, ResponseType::kError);
  EXPECT_EQ(failed[0].names, std::vector<std::string>{"a"});
  EXPECT_EQ(failed[0].error_code, StatusCode::kDeadlineExceeded);
  EXPECT_EQ(failed[0].error.rfind("stalled: allreduce 'a': submitted by rank 0, missing ranks: "
                                  "1,2 (waiting 6.0 s); failed after "
                                  "KOLO_STALL_SHUTDOWN_TIME_SECONDS=5", 0), 0u)
      << failed[0].error;
  EXPECT_EQ(c.pending(), 0u);
}

TEST(StallInspector, DisabledSaysNothing) {
  Coordinator c(2);
  c.Add(One(OpType::kAllreduce, "a"), 0);
  StallInspector inspector(StallOptions{false, 1, 1});
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(inspector.Inspect(c, Clock::now() + std::chrono::seconds(100)).empty());
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(inspector.HoldLimit(), Clock::duration::max());
}

// Runtimes: every rank allreduces "x" once (so it is cached when the cache is on), then all but
// the last rank submit "x" again: after the shutdown time their handles fail with the stall
// message, and the runtime keeps working for the next step.
class StallRuntime : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(StallRuntime, StalledTensorFailsOnTheRanksThatSubmittedIt) {
  const auto [ranks, capacity] = GetParam();
  Config config = testing::FastConfig();
  config.cache_capacity = capacity;
  config.stall_check_seconds = 0.2;
  config.stall_shutdown_seconds = 0.5;
  // The ranks wait for each other with this instead of barriers: a barrier that one rank
  // reaches long before the others is itself a stalled operation.
  std::atomic<int> stalled_done{0};
  testing::RunRuntimes(ranks, config, [&, ranks = ranks](Runtime& rt) {
    const int r = rt.layout().rank;
    std::vector<float> in(4, 1.0f), out(4, 0.0f);
    auto submit = [&](const std::string& name) {
      Submission s;
      s.name = name;
      s.input = in.data();
      s.output = out.data();
      s.shape = {4};
      return rt.Enqueue(s);
    };
    auto h = submit("x");
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    ASSERT_TRUE(testing::WaitFor(**h).ok());
    EXPECT_EQ(out[0], static_cast<float>(ranks));
    if (r != ranks - 1) {
      const auto start = Clock::now();
      auto again = submit("x");
      ASSERT_TRUE(again.ok());
      Status s = testing::WaitFor(**again, std::chrono::seconds(15));
      EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
      EXPECT_NE(s.message().find("allreduce 'x': submitted by rank"), std::string::npos)
          << s.message();
      EXPECT_NE(s.message().find("missing ranks: " + std::to_string(ranks - 1)),
                std::string::npos) << s.message();
      EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
      stalled_done.fetch_add(1);
    } else {
      while (stalled_done.load() < ranks - 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    auto next = submit("y");
    ASSERT_TRUE(next.ok());
    ASSERT_TRUE(testing::WaitFor(**next).ok());
    EXPECT_EQ(out[0], static_cast<float>(ranks));
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, StallRuntime,
                         ::testing::Combine(::testing::Values(2, 3), ::testing::Values(0, 64)),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "ranks_cache" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace kolo
