// The deadlock check: the coordinator's rule as pure logic (DeadlockDetector over a Coordinator),
// then whole Runtimes in the thread world, where every rank blocks in Handle::WaitFor on an
// operation its peers never submit: each fails on every rank within seconds (no stall setting),
// with a report of what each rank waits for, and the next operation works. A rank that is late
// (computing, not waiting) is never failed. In the controller, a rank that is not blocked when
// the others send their cache hits to the check never runs that hit alone.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "runtime/negotiation/controller.h"
#include "runtime/negotiation/deadlock.h"
#include "runtime/wire/wire.h"
#include "unit/thread_world.h"

namespace kolo {
namespace {

Request Req(const std::string& name, OpType op = OpType::kAllreduce) {
  Request r;
  r.name = name;
  r.op = op;
  r.shape = {4};
  return r;
}

RequestList Blocked(std::vector<Request> reqs, std::vector<std::string> waiting) {
  RequestList l;
  l.requests = std::move(reqs);
  l.blocked = true;
  l.waiting = std::move(waiting);
  return l;
}

// Adds each rank's list, then one Observe: what a slow cycle on the coordinator does.
std::vector<Response> Cycle(Coordinator& c, DeadlockDetector& d, std::vector<RequestList> lists) {
  for (size_t r = 0; r < lists.size(); ++r) c.Add(lists[r], static_cast<int>(r));
  std::vector<Response> ready = c.TakeReady();
  std::vector<Response> failed = d.Observe(c, lists, !ready.empty());
  ready.insert(ready.end(), failed.begin(), failed.end());
  return ready;
}

TEST(DeadlockDetector, EveryRankWaitingForWhatOthersNeverSubmitFailsAfterTwoCycles) {
  Coordinator c(3);
  DeadlockDetector d;
  auto out = Cycle(c, d, {Blocked({Req("a")}, {"a"}), Blocked({Req("b")}, {"b"}),
                          Blocked({Req("b")}, {"b"})});
  EXPECT_TRUE(out.empty()) << "one cycle is not enough";
  out = Cycle(c, d, {Blocked({}, {"a"}), Blocked({}, {"b"}), Blocked({}, {"b"})});
  ASSERT_EQ(out.size(), 2u);
  const std::string why =
      "deadlock: every rank waits for an operation that cannot complete: rank 0 waits for "
      "allreduce 'a' (not submitted by ranks 1,2), ranks 1,2 wait for allreduce 'b' (not "
      "submitted by rank 0)";
  EXPECT_EQ(out[0].names, std::vector<std::string>{"a"});
  EXPECT_EQ(out[0].type, ResponseType::kError);
  EXPECT_EQ(out[0].error_code, StatusCode::kDeadlineExceeded);
  EXPECT_EQ(out[0].error, "allreduce 'a': " + why);
  EXPECT_EQ(out[1].error, "allreduce 'b': " + why);
  EXPECT_EQ(c.pending(), 0u);
}

TEST(DeadlockDetector, TheSameNameUnderTwoCollectivesIsNamedAsSuch) {
  Coordinator c(3);
  DeadlockDetector d;
  std::vector<RequestList> lists = {
      Blocked({Req("allreduce.x")}, {"allreduce.x"}),
      Blocked({Req("allgather.x", OpType::kAllgather)}, {"allgather.x"}),
      Blocked({Req("allgather.x", OpType::kAllgather)}, {"allgather.x"})};
  EXPECT_TRUE(Cycle(c, d, lists).empty());
  for (auto& l : lists) l.requests.clear();
  auto out = Cycle(c, d, lists);
  ASSERT_EQ(out.size(), 2u);
  for (const Response& r : out) {
    EXPECT_NE(r.error.find("'x': ranks 1,2 called allgather, rank 0 called allreduce; deadlock"),
              std::string::npos) << r.error;
  }
}

TEST(DeadlockDetector, ARankThatIsNotBlockedIsNoDeadlock) {
  Coordinator c(2);
  DeadlockDetector d;
  RequestList late;  // rank 1 is computing: not blocked, nothing submitted yet
  for (int i = 0; i < 5; ++i) {
    auto out = Cycle(c, d, {Blocked(i == 0 ? std::vector<Request>{Req("a")} : std::vector<Request>{},
                                    {"a"}),
                            late});
    EXPECT_TRUE(out.empty());
  }
  // It submits at last: 'a' runs.
  RequestList now;
  now.requests = {Req("a")};
  auto out = Cycle(c, d, {Blocked({}, {"a"}), now});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, ResponseType::kAllreduce);
}

TEST(DeadlockDetector, AWaitForANameNotPendingHereIsNoDeadlock) {
  // Rank 1 waits for a name the coordinator has not seen (a cache hit held on that rank): the
  // coordinator cannot tell, so it does not fail anything.
  Coordinator c(2);
  DeadlockDetector d;
  for (int i = 0; i < 4; ++i) {
    auto out = Cycle(c, d, {Blocked(i == 0 ? std::vector<Request>{Req("a")} : std::vector<Request>{},
                                    {"a"}),
                            Blocked({}, {"b"})});
    EXPECT_TRUE(out.empty());
  }
}

TEST(DeadlockDetector, AWaitedGroupMemberFailsWithItsGroup) {
  Coordinator c(2);
  DeadlockDetector d;
  Request g0 = Req("g.0"), g1 = Req("g.1");
  g0.group = g1.group = "g.0";
  g0.group_size = g1.group_size = 2;
  std::vector<RequestList> lists = {Blocked({g0, g1}, {"g.1"}), Blocked({Req("b")}, {"b"})};
  EXPECT_TRUE(Cycle(c, d, lists).empty());
  for (auto& l : lists) l.requests.clear();
  auto out = Cycle(c, d, lists);
  std::vector<std::string> names;
  for (const Response& r : out) names.push_back(r.names[0]);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"b", "g.0", "g.1"}));
  EXPECT_EQ(c.pending(), 0u);
}

// ---- whole runtimes -----------------------------------------------------------------------

// Blocks in Handle::WaitFor (a blocked wait, which the deadlock check counts) for up to 20 s.
Status BlockOn(Handle& h) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!h.WaitFor(std::chrono::milliseconds(100))) {
    if (std::chrono::steady_clock::now() > until) {
      return DeadlineExceededError("still blocked after 20 s");
    }
  }
  return h.status();
}

class DeadlockRuntime : public ::testing::TestWithParam<std::tuple<int, int64_t>> {};

TEST_P(DeadlockRuntime, RanksWaitingForEachOtherFailPromptlyThenTheNextOpWorks) {
  const auto [ranks, cache] = GetParam();
  Config config = testing::FastConfig();
  config.cache_capacity = cache;
  testing::RunRuntimes(ranks, config, [&, ranks = ranks](Runtime& rt) {
    const int rank = rt.layout().rank;
    std::vector<float> in(4, 1.0f + rank), out(4, -1.0f);
    // A first step that works (and, with the cache, makes both names cache hits next time).
    for (int step = 0; step < 2; ++step) {
      for (const char* name : {"a", "b"}) {
        auto h = rt.Enqueue(testing::FloatSum(name, in.data(), out.data(), 4));
        ASSERT_TRUE(h.ok()) << h.status().ToString();
        ASSERT_TRUE(BlockOn(**h).ok()) << name;
      }
    }
    // Rank 0 waits for 'a', the others for 'b': nobody will ever submit the other one.
    const auto start = std::chrono::steady_clock::now();
    auto h = rt.Enqueue(testing::FloatSum(rank == 0 ? "a" : "b", in.data(), out.data(), 4));
    ASSERT_TRUE(h.ok());
    Status s = BlockOn(**h);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
    EXPECT_NE(s.message().find("deadlock: every rank waits for an operation that cannot "
                               "complete: rank 0 waits for allreduce 'a'"),
              std::string::npos) << s.message();
    EXPECT_LT(seconds, 5.0) << s.message();
    // The next operation works.
    std::fill(out.begin(), out.end(), -1.0f);
    auto next = rt.Enqueue(testing::FloatSum("c", in.data(), out.data(), 4));
    ASSERT_TRUE(next.ok());
    ASSERT_TRUE(BlockOn(**next).ok());
    const float want = static_cast<float>(ranks * (ranks + 1)) / 2.0f;
    for (float v : out) EXPECT_EQ(v, want);
  });
}

INSTANTIATE_TEST_SUITE_P(RanksAndCache, DeadlockRuntime,
                         ::testing::Combine(::testing::Values(2, 3),
                                            ::testing::Values(int64_t{0}, int64_t{1024})));

TEST(DeadlockRuntime, ALateRankIsNotADeadlock) {
  testing::RunRuntimes(3, testing::FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    std::vector<float> in(4, 1.0f + rank), out(4, -1.0f);
    // Rank 2 computes for a second before it submits; ranks 0 and 1 wait for it meanwhile.
    if (rank == 2) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    auto h = rt.Enqueue(testing::FloatSum("late", in.data(), out.data(), 4));
    ASSERT_TRUE(h.ok());
    ASSERT_TRUE(BlockOn(**h).ok()) << (*h)->status().ToString();
    for (float v : out) EXPECT_EQ(v, 6.0f);
  });
}

// The check's trigger is the same on every rank (cycles in which every rank was blocked), but
// whether a rank sends its waiting hits to the coordinator depends on its own callers: one
// between two slices of its wait is not blocked in that cycle. Here the last rank is blocked on
// something else for two cycles while the others hold a hit of "x"; in the third it submits
// "x" itself and is not blocked yet, while the others, blocked, send theirs to the check. Every
// rank must run "x" in the same cycle (it ran alone on the last rank, a hang in the data plane,
// while the others waited for it at the coordinator).
class DeadlockCheckInController : public ::testing::TestWithParam<int> {};

TEST_P(DeadlockCheckInController, ARankNotBlockedWhenTheOthersSendTheirHitsRunsThemTogether) {
  const int n = GetParam();
  constexpr int kCycles = 6;
  std::vector<std::vector<std::string>> encoded(n);  // [rank][cycle]
  std::vector<std::vector<int>> x_cycles(n);         // cycles in which "x" ran, per rank
  testing::RunOnThreadWorld(n, [&](Communicator& comm) {
    ControllerOptions options;
    options.cache_capacity = 8;
    Controller controller(comm, options);
    const int r = comm.Rank();
    const bool last = r == n - 1;
    for (int cycle = 0; cycle < kCycles; ++cycle) {
      RequestList mine;
      // Cycle 0 caches "x" on every rank; from cycle 1 the others hold it as a hit, the last
      // rank submits it in cycle 3.
      const bool submits = cycle == 0 || (cycle == 1 && !last) || (cycle == 3 && last);
      if (submits) mine.requests.push_back(Req("x"));
      for (Request& q : mine.requests) q.rank = r;
      const bool blocked = cycle >= 1 && !(cycle == 3 && last);
      controller.SetWaiting(blocked, blocked
                                         ? std::vector<std::string>{last && cycle < 3 ? "y" : "x"}
                                         : std::vector<std::string>{});
      auto result = controller.Negotiate(mine);
      ASSERT_TRUE(result.ok()) << result.status().ToString();
      encoded[r].push_back(EncodeResponseList(*result));
      for (const Response& resp : result->responses) {
        for (const std::string& name : resp.names) {
          if (name == "x") x_cycles[r].push_back(cycle);
        }
        // Hits may come by id only: a Response without names that runs one tensor is "x".
        if (resp.names.empty() && resp.NumTensors() == 1) x_cycles[r].push_back(cycle);
      }
    }
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(x_cycles[r].size(), 2u) << "rank " << r;
    EXPECT_EQ(x_cycles[r][0], 0) << "rank " << r;
    EXPECT_EQ(x_cycles[r][1], x_cycles[0][1]) << "rank " << r << " ran x in another cycle";
    for (int c = 0; c < kCycles; ++c) {
      EXPECT_EQ(encoded[r][c], encoded[0][c]) << "rank " << r << " cycle " << c;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeadlockCheckInController, ::testing::Values(2, 3),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
}  // namespace kolo
