// The finaliser's queue and polling (runtime/finaliser.h), driven by fake probes instead of
// CUDA events, so the logic the GPU path relies on is tested on every machine: completion in
// enqueue order whatever order the work finishes in, failures (the work's own, liveness) with
// an abort each and no callback before the aborted work has drained, shutdown with work still
// pending (every callback runs once, Close returns in
// bounded time), and many items from several threads.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/finaliser.h"

namespace kolo {
namespace {

using std::chrono::milliseconds;

// One piece of fake work: the test flips its state; the probe reports it.
struct FakeWork {
  std::atomic<int> state{0};  // 0 running, 1 done, 2 failed
  std::atomic<int> polls{0};
  std::atomic<int> aborts{0};
  std::atomic<int> liveness_checks{0};
  std::atomic<bool> peer_gone{false};
  std::atomic<bool> drained{true};  // false: aborted work still runs until the test says so
  std::atomic<int> drain_polls{0};
};

class FakeProbe : public CompletionProbe {
 public:
  explicit FakeProbe(std::shared_ptr<FakeWork> work) : work_(std::move(work)) {}
  Progress Poll(Status* error) override {
    work_->polls.fetch_add(1);
    switch (work_->state.load()) {
      case 1:
        return Progress::kDone;
      case 2:
        *error = UnavailableError("NCCL (asynchronous) failed: remote process exited");
        return Progress::kFailed;
      default:
        return Progress::kPending;
    }
  }
  Status CheckLiveness() override {
    work_->liveness_checks.fetch_add(1);
    return work_->peer_gone ? UnavailableError("rank 1 (pid 124 on host) is gone")
                            : Status::OK();
  }
  void Abort() override { work_->aborts.fetch_add(1); }
  bool Drained() override {
    work_->drain_polls.fetch_add(1);
    return work_->drained.load();
  }

 private:
  std::shared_ptr<FakeWork> work_;
};

FinaliserOptions FastOptions() {
  FinaliserOptions o;
  o.liveness_interval = milliseconds(5);
  o.spin = std::chrono::microseconds(50);
  o.sleep = std::chrono::microseconds(20);
  return o;
}

// Callback outcomes in the order they ran.
struct Log {
  std::mutex mu;
  std::vector<int> order;
  std::vector<Status> status;
  std::atomic<int> calls{0};
  Finaliser::Callback Record(int id) {
    return [this, id](Status s) {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(id);
      status.push_back(std::move(s));
      calls.fetch_add(1);
    };
  }
};

bool WaitUntil(const std::function<bool()>& cond, milliseconds deadline = milliseconds(5000)) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

TEST(Finaliser, CompletesInEnqueueOrderWhateverOrderTheWorkFinishes) {
  Finaliser f(FastOptions());
  Log log;
  std::vector<std::shared_ptr<FakeWork>> work;
  for (int i = 0; i < 5; ++i) {
    work.push_back(std::make_shared<FakeWork>());
    f.Enqueue(std::make_unique<FakeProbe>(work.back()), log.Record(i));
  }
  // The last ones finish first: nothing may complete until the first does.
  for (int i = 4; i >= 1; --i) work[i]->state = 1;
  std::this_thread::sleep_for(milliseconds(30));
  EXPECT_EQ(log.calls.load(), 0) << "an item completed before the one enqueued ahead of it";
  EXPECT_EQ(f.pending(), 5u);
  work[0]->state = 1;
  f.Flush();
  ASSERT_EQ(log.order, (std::vector<int>{0, 1, 2, 3, 4}));
  for (const Status& s : log.status) EXPECT_TRUE(s.ok()) << s.ToString();
  for (const auto& w : work) EXPECT_EQ(w->aborts.load(), 0);
  EXPECT_EQ(f.pending(), 0u);
}

// The caller's buffers are its own again when its callback runs: after a failure, not before
// the aborted work has left the device.
TEST(Finaliser, AFailedItemCompletesOnlyOnceItsAbortedWorkHasDrained) {
  Log log;  // before the finaliser, whose destructor may still run a callback
  Finaliser f(FastOptions());
  auto w = std::make_shared<FakeWork>();
  w->drained = false;
  f.Enqueue(std::make_unique<FakeProbe>(w), log.Record(0));
  w->state = 2;
  ASSERT_TRUE(WaitUntil([&] { return w->drain_polls.load() > 3; }));
  EXPECT_EQ(w->aborts.load(), 1);
  EXPECT_EQ(log.calls.load(), 0) << "the callback ran while the aborted work still ran";
  w->drained = true;
  f.Flush();
  ASSERT_EQ(log.calls.load(), 1);
  EXPECT_EQ(log.status[0].code(), StatusCode::kUnavailable);
  EXPECT_EQ(log.status[0].message(), "NCCL (asynchronous) failed: remote process exited");
}

// A device that never drains still gives the callback its turn, in bounded time, saying so.
TEST(Finaliser, WorkThatNeverDrainsCompletesAfterTheDrainTimeoutSayingSo) {
  FinaliserOptions o = FastOptions();
  o.drain_timeout = milliseconds(50);
  Log log;
  Finaliser f(o);
  auto w = std::make_shared<FakeWork>();
  w->drained = false;
  w->peer_gone = true;
  f.Enqueue(std::make_unique<FakeProbe>(w), log.Record(0));
  const auto start = std::chrono::steady_clock::now();
  f.Flush();
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(5000));
  ASSERT_EQ(log.calls.load(), 1);
  EXPECT_EQ(w->aborts.load(), 1);
  EXPECT_EQ(log.status[0].code(), StatusCode::kUnavailable);
  EXPECT_NE(log.status[0].message().find("rank 1 (pid 124 on host) is gone; the aborted work had "
                                         "still not drained from the device"),
            std::string::npos)
      << log.status[0].message();
  EXPECT_NE(log.status[0].message().find("its output may still change"), std::string::npos);
}

// Shutdown stays bounded by Close's deadline even when every aborted item never drains: the
// drain waits end at that deadline instead of adding drain_timeout per item.
TEST(Finaliser, CloseStaysBoundedWhenAbortedWorkNeverDrains) {
  Log log;
  FinaliserOptions o = FastOptions();
  o.drain_timeout = milliseconds(10000);
  Finaliser f(o);
  std::vector<std::shared_ptr<FakeWork>> work;
  for (int i = 0; i < 5; ++i) {
    work.push_back(std::make_shared<FakeWork>());
    work.back()->drained = false;
    f.Enqueue(std::make_unique<FakeProbe>(work.back()), log.Record(i));
  }
  const auto start = std::chrono::steady_clock::now();
  f.Close(milliseconds(50), "kolo is shutting down");
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(5000));
  ASSERT_EQ(log.calls.load(), 5);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(work[i]->aborts.load(), 1);
    EXPECT_NE(log.status[i].message().find("had still not drained"), std::string::npos)
        << log.status[i].message();
  }
}

TEST(Finaliser, CallbacksRunOnTheFinalisersThread) {
  Finaliser f(FastOptions());
  std::thread::id ran_on;
  auto w = std::make_shared<FakeWork>();
  w->state = 1;
  f.Enqueue(std::make_unique<FakeProbe>(w), [&](Status) { ran_on = std::this_thread::get_id(); });
  f.Flush();
  EXPECT_NE(ran_on, std::this_thread::get_id());
  EXPECT_NE(ran_on, std::thread::id());
}

TEST(Finaliser, AFailureAbortsItsWorkAndLaterItemsStillComplete) {
  Finaliser f(FastOptions());
  Log log;
  auto bad = std::make_shared<FakeWork>();
  auto good = std::make_shared<FakeWork>();
  f.Enqueue(std::make_unique<FakeProbe>(bad), log.Record(0));
  f.Enqueue(std::make_unique<FakeProbe>(good), log.Record(1));
  good->state = 1;
  bad->state = 2;
  f.Flush();
  ASSERT_EQ(log.order, (std::vector<int>{0, 1}));
  EXPECT_EQ(log.status[0].code(), StatusCode::kUnavailable);
  EXPECT_NE(log.status[0].message().find("remote process exited"), std::string::npos)
      << log.status[0].message();
  EXPECT_TRUE(log.status[1].ok()) << log.status[1].ToString();
  EXPECT_EQ(bad->aborts.load(), 1);
  EXPECT_EQ(good->aborts.load(), 0);
}

TEST(Finaliser, ALostPeerFailsThePendingItemWithItsName) {
  Finaliser f(FastOptions());
  Log log;
  auto w = std::make_shared<FakeWork>();  // never finishes: the peer it waits on is gone
  f.Enqueue(std::make_unique<FakeProbe>(w), log.Record(0));
  ASSERT_TRUE(WaitUntil([&] { return w->liveness_checks.load() > 0; }));
  EXPECT_EQ(log.calls.load(), 0) << "a live peer must not fail the item";
  w->peer_gone = true;
  ASSERT_TRUE(WaitUntil([&] { return log.calls.load() == 1; }));
  EXPECT_EQ(log.status[0].code(), StatusCode::kUnavailable);
  EXPECT_NE(log.status[0].message().find("rank 1 (pid 124 on host) is gone"), std::string::npos)
      << log.status[0].message();
  EXPECT_EQ(w->aborts.load(), 1);
}

TEST(Finaliser, OutcomesWithoutWorkKeepTheirPlaceInTheOrder) {
  Finaliser f(FastOptions());
  Log log;
  auto w = std::make_shared<FakeWork>();
  f.Enqueue(std::make_unique<FakeProbe>(w), log.Record(0));
  f.EnqueueOutcome(InvalidArgumentError("refused before it ran"), log.Record(1));
  f.Enqueue(nullptr, log.Record(2));  // already finished
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(log.calls.load(), 0);
  w->state = 1;
  f.Flush();
  ASSERT_EQ(log.order, (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(log.status[0].ok());
  EXPECT_EQ(log.status[1].code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(log.status[2].ok());
}

TEST(Finaliser, CloseWaitsForWorkThatFinishesInTime) {
  Finaliser f(FastOptions());
  Log log;
  std::vector<std::shared_ptr<FakeWork>> work;
  for (int i = 0; i < 3; ++i) {
    work.push_back(std::make_shared<FakeWork>());
    f.Enqueue(std::make_unique<FakeProbe>(work.back()), log.Record(i));
  }
  std::thread finisher([&] {
    std::this_thread::sleep_for(milliseconds(30));
    for (auto& w : work) w->state = 1;
  });
  f.Close(milliseconds(10000), "kolo shut down");
  finisher.join();
  ASSERT_EQ(log.order, (std::vector<int>{0, 1, 2}));
  for (const Status& s : log.status) EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(Finaliser, CloseFailsWorkStillPendingAtItsDeadlineAndLosesNoCallback) {
  Finaliser f(FastOptions());
  Log log;
  std::vector<std::shared_ptr<FakeWork>> work;
  for (int i = 0; i < 4; ++i) {
    work.push_back(std::make_shared<FakeWork>());  // stuck forever
    f.Enqueue(std::make_unique<FakeProbe>(work.back()), log.Record(i));
  }
  const auto start = std::chrono::steady_clock::now();
  f.Close(milliseconds(50), "kolo shut down");
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, milliseconds(3000)) << "Close must return in bounded time";
  ASSERT_EQ(log.order, (std::vector<int>{0, 1, 2, 3}));
  for (const Status& s : log.status) {
    EXPECT_EQ(s.code(), StatusCode::kUnavailable);
    EXPECT_NE(s.message().find("kolo shut down while this work was still running"),
              std::string::npos)
        << s.message();
  }
  for (const auto& w : work) EXPECT_EQ(w->aborts.load(), 1);
  // Closed: later work is not waited for, but its callback still runs (at once, here).
  auto late = std::make_shared<FakeWork>();
  Status late_status;
  f.Enqueue(std::make_unique<FakeProbe>(late), [&](Status s) { late_status = std::move(s); });
  EXPECT_EQ(late_status.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(late_status.message().find("kolo shut down"), std::string::npos);
  EXPECT_EQ(late->aborts.load(), 1);
  f.Close(milliseconds(0), "again");  // idempotent
}

TEST(Finaliser, DestroyingItWithPendingWorkRunsEveryCallback) {
  Log log;
  auto w = std::make_shared<FakeWork>();
  {
    Finaliser f(FastOptions());
    f.Enqueue(std::make_unique<FakeProbe>(w), log.Record(0));
  }
  ASSERT_EQ(log.calls.load(), 1);
  EXPECT_EQ(log.status[0].code(), StatusCode::kUnavailable);
  EXPECT_EQ(w->aborts.load(), 1);
}

TEST(Finaliser, ANeverUsedFinaliserStartsNoThreadAndClosesAtOnce) {
  Finaliser f;
  EXPECT_EQ(f.pending(), 0u);
  f.Flush();
  f.Close(milliseconds(1000), "kolo shut down");
}

// Several submitting threads, many items each, finishing in a scrambled order: every callback
// runs exactly once, in the order the items were enqueued (recorded under one lock with the
// enqueue itself).
TEST(Finaliser, ManyItemsFromSeveralThreads) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 2500;
  Finaliser f(FastOptions());
  std::mutex enqueue_mu;
  std::vector<int> enqueue_order;
  // Made up front, so the threads below only read the vector.
  std::vector<std::shared_ptr<FakeWork>> all;
  for (int i = 0; i < kThreads * kPerThread; ++i) all.push_back(std::make_shared<FakeWork>());
  Log log;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int id = t * kPerThread + i;
        const std::shared_ptr<FakeWork>& w = all[id];
        // Most finish at once, some a little later, from another thread below.
        if (id % 7 != 0) w->state = 1;
        std::lock_guard<std::mutex> lock(enqueue_mu);
        enqueue_order.push_back(id);
        f.Enqueue(std::make_unique<FakeProbe>(w), log.Record(id));
      }
    });
  }
  std::thread late([&] {
    for (int round = 0; round < 50; ++round) {
      std::this_thread::sleep_for(milliseconds(1));
      for (auto& w : all) w->state = 1;
    }
  });
  for (auto& t : threads) t.join();
  late.join();
  for (auto& w : all) w->state = 1;
  f.Flush();
  ASSERT_EQ(log.calls.load(), kThreads * kPerThread);
  EXPECT_EQ(log.order, enqueue_order);
  for (const Status& s : log.status) ASSERT_TRUE(s.ok()) << s.ToString();
  f.Close(milliseconds(1000), "kolo shut down");
}

}  // namespace
}  // namespace kolo
