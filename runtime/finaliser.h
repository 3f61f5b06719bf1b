// The finaliser (completion is an event that a finaliser polls, so the background thread
// never blocks on a GPU): a thread of its own that waits for work the background thread
// has started and not waited for, then runs that work's completion (its handles), so the
// background thread can go on negotiating and enqueueing the next Responses meanwhile.
//
// Each item is a probe (is the work done, still running, or failed?) and a callback. Items are
// taken strictly in the order they were enqueued: the callback of item k runs only after those
// of items 0..k-1, so handles complete in the order their Responses ran. While the front item
// is pending, the thread polls its probe (Poll: cheap, every turn; CheckLiveness: a lost peer,
// about once a second); a failure aborts the work (Abort: on the GPU, ncclCommAbort, so that
// nothing stays stuck behind it), waits for the aborted work to leave the device (Drained: a
// kernel still running could yet write the caller's output, which the callback hands back)
// and hands the error to the callback. Polling first yields the
// core for a short while, then sleeps between polls, so a finaliser with a long item in flight
// costs little CPU and one with a short item adds little latency.
//
// What a probe looks at is behind the CompletionProbe interface, so this file knows nothing of
// CUDA: runtime/device/device_finaliser.h has the CUDA event + NCCL probe; tests drive the queue
// with fake probes.
//
// Shutdown: Close() stops new items, lets the pending ones finish, and once its deadline passes
// aborts and fails those still pending, so every callback runs exactly once and Close returns
// in bounded time. An item enqueued after Close is failed at once on the caller's thread.
#ifndef KOLO_RUNTIME_FINALISER_H_
#define KOLO_RUNTIME_FINALISER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/status.h"

namespace kolo {

enum class Progress { kPending, kDone, kFailed };

// The state of one piece of asynchronous work. Called from the finaliser's thread only, one
// item at a time.
class CompletionProbe {
 public:
  virtual ~CompletionProbe() = default;
  // Cheap, called every polling turn: finished, still running, or failed (then *error says why:
  // the event's error, the communicator's asynchronous error).
  virtual Progress Poll(Status* error) = 0;
  // Slower checks that the work can still finish (a peer process that is gone), called about
  // once per FinaliserOptions::liveness_interval while pending. OK or the reason it cannot.
  virtual Status CheckLiveness() { return Status::OK(); }
  // Called once when the item fails (its own error, liveness, or the shutdown deadline), before
  // its callback: stop the work so that neither the device nor later items stay stuck on it.
  virtual void Abort() {}
  // After Abort: whether the aborted work has stopped touching memory (on the GPU: the stream
  // has passed it). Polled before the callback runs, up to FinaliserOptions::drain_timeout.
  virtual bool Drained() { return true; }
};

struct FinaliserOptions {
  // How often a pending item's CheckLiveness runs.
  std::chrono::milliseconds liveness_interval{1000};
  // Polls back to back (yielding the core) for this long, then sleeps `sleep` between polls.
  std::chrono::microseconds spin{200};
  std::chrono::microseconds sleep{50};
  // How long a failed item's aborted work may take to drain (Drained) before its callback runs
  // anyway, with an error that says the output may still change; once closing, no later than
  // Close's deadline. An aborted NCCL communicator's kernels return within milliseconds; this
  // bounds a device that does not.
  std::chrono::milliseconds drain_timeout{10000};
};

class Finaliser {
 public:
  // Its outcome: OK when the work finished, else why not. Runs on the finaliser's thread (or
  // the enqueuing thread once closed), exactly once, without the finaliser's lock held.
  using Callback = std::function<void(Status)>;

  explicit Finaliser(FinaliserOptions options = {});
  ~Finaliser();  // Close(0 s): what is still pending fails at once
  Finaliser(const Finaliser&) = delete;
  Finaliser& operator=(const Finaliser&) = delete;

  // Queues `done` behind every item enqueued before; it runs once `probe` reports the work
  // finished or failed. A null probe is work already finished: `done(OK)` in its turn. The
  // thread starts on the first call, so a process that never enqueues never has one. Any thread.
  void Enqueue(std::unique_ptr<CompletionProbe> probe, Callback done);
  // `done(status)` in its turn, with nothing to wait for: work that failed before it could
  // start, completed in the same order as the rest.
  void EnqueueOutcome(Status status, Callback done);
  // Blocks until every item enqueued before the call has run its callback.
  void Flush();
  // Stops taking items and waits for the pending ones; those still pending after `deadline`
  // are aborted and fail with kUnavailable "`reason` (waited N ms)". Then the thread ends.
  // Idempotent; any thread but the finaliser's own (a callback must not call it).
  void Close(std::chrono::milliseconds deadline, const std::string& reason);

  // Items enqueued and not yet completed (for tests and logs).
  size_t pending() const;

 private:
  struct Item {
    std::unique_ptr<CompletionProbe> probe;
    Callback done;
    Status outcome;  // for a null probe
  };

  void Loop();
  // Polls `item` until it finishes, fails, or the close deadline passes.
  Status Await(Item& item);
  // Aborts a failed item's work and waits for it to drain (bounded): `error`, or `error` with
  // why the wait gave up.
  Status AbortAndDrain(CompletionProbe& probe, Status error);

  const FinaliserOptions options_;
  mutable std::mutex mu_;
  std::condition_variable work_;      // items or closing
  std::condition_variable finished_;  // completed_ advanced
  std::deque<Item> items_;            // guarded by mu_; the front one is being awaited
  uint64_t enqueued_ = 0;             // guarded by mu_
  uint64_t completed_ = 0;            // guarded by mu_
  bool closing_ = false;              // guarded by mu_
  std::string close_reason_;          // guarded by mu_, set with closing_
  std::chrono::steady_clock::time_point close_started_;  // guarded by mu_
  // Nanoseconds of steady_clock when pending items give up; max while not closing. Read by the
  // polling loop without the lock.
  std::atomic<int64_t> deadline_ns_;
  std::thread thread_;  // started under mu_ by the first Enqueue
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_FINALISER_H_
