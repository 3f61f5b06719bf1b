#include "runtime/finaliser.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace kolo {

namespace {

using Clock = std::chrono::steady_clock;

int64_t Nanos(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

Finaliser::Finaliser(FinaliserOptions options)
    : options_(options), deadline_ns_(std::numeric_limits<int64_t>::max()) {}

Finaliser::~Finaliser() { Close(std::chrono::milliseconds(0), "kolo's finaliser was destroyed"); }

void Finaliser::Enqueue(std::unique_ptr<CompletionProbe> probe, Callback done) {
  std::string reason;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!closing_) {
      items_.push_back(Item{std::move(probe), std::move(done), Status::OK()});
      ++enqueued_;
      if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
      work_.notify_one();
      return;
    }
    reason = close_reason_;
  }
  // Nobody will wait for this work any more: stop it, and say so to its owner.
  if (probe) probe->Abort();
  done(FailedPreconditionError(reason + " (the finaliser has stopped; this work was not waited "
                                        "for)"));
}

void Finaliser::EnqueueOutcome(Status status, Callback done) {
  std::string reason;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!closing_) {
      items_.push_back(Item{nullptr, std::move(done), std::move(status)});
      ++enqueued_;
      if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
      work_.notify_one();
      return;
    }
  }
  done(std::move(status));  // nothing to wait for: its own outcome stands
}

void Finaliser::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = enqueued_;
  finished_.wait(lock, [&] { return completed_ >= target; });
}

void Finaliser::Close(std::chrono::milliseconds deadline, const std::string& reason) {
  std::thread thread;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!closing_) {
      closing_ = true;
      close_reason_ = reason;
      close_started_ = Clock::now();
      deadline_ns_.store(Nanos(close_started_ + deadline));
    }
    thread = std::move(thread_);
  }
  work_.notify_all();
  if (thread.joinable()) thread.join();
}

size_t Finaliser::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<size_t>(enqueued_ - completed_);
}

void Finaliser::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_.wait(lock, [&] { return !items_.empty() || closing_; });
    if (items_.empty()) return;  // closing, and every item has completed
    // Only this thread removes items, and a deque's push_back leaves references to the others
    // valid, so `item` stays put while submitters append behind it.
    Item& item = items_.front();
    lock.unlock();
    Status outcome = Await(item);
    {
      // The probe (a CUDA event) and the callback's captures go before the lock is taken again.
      std::unique_ptr<CompletionProbe> probe = std::move(item.probe);
      Callback done = std::move(item.done);
      probe.reset();
      done(std::move(outcome));
    }
    lock.lock();
    items_.pop_front();
    ++completed_;
    finished_.notify_all();
  }
}

Status Finaliser::Await(Item& item) {
  if (!item.probe) return std::move(item.outcome);
  CompletionProbe& probe = *item.probe;
  const Clock::time_point start = Clock::now();
  Clock::time_point next_liveness = start + options_.liveness_interval;
  for (;;) {
    Status error;
    switch (probe.Poll(&error)) {
      case Progress::kDone:
        return Status::OK();
      case Progress::kFailed:
        return AbortAndDrain(
            probe, error.ok() ? InternalError("the work failed without saying why") : error);
      case Progress::kPending:
        break;
    }
    const Clock::time_point now = Clock::now();
    if (now >= next_liveness) {
      Status alive = probe.CheckLiveness();
      if (!alive.ok()) return AbortAndDrain(probe, std::move(alive));
      next_liveness = now + options_.liveness_interval;
    }
    if (Nanos(now) >= deadline_ns_.load(std::memory_order_relaxed)) {
      std::string reason;
      Clock::time_point since;
      {
        std::lock_guard<std::mutex> lock(mu_);
        reason = close_reason_;
        since = close_started_;
      }
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - since);
      return AbortAndDrain(
          probe, UnavailableError(reason + " while this work was still running (waited " +
                                  std::to_string(waited.count()) + " ms); it was aborted"));
    }
    if (now - start < options_.spin) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(options_.sleep);
    }
  }
}

Status Finaliser::AbortAndDrain(CompletionProbe& probe, Status error) {
  probe.Abort();
  const Clock::time_point start = Clock::now();
  Clock::time_point until = start + options_.drain_timeout;
  // While closing, no later than Close's deadline: shutdown stays bounded by it, however many
  // items fail.
  const int64_t close_ns = deadline_ns_.load(std::memory_order_relaxed);
  if (close_ns != std::numeric_limits<int64_t>::max()) {
    const Clock::time_point close(
        std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(close_ns)));
    until = std::max(start, std::min(until, close));
  }
  while (!probe.Drained()) {
    const Clock::time_point now = Clock::now();
    if (now >= until) {
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - start);
      return Status(error.code(), error.message() +
                                      "; the aborted work had still not drained from the device " +
                                      std::to_string(waited.count()) +
                                      " ms after the abort, so its output may still change");
    }
    std::this_thread::sleep_for(options_.sleep);
  }
  return error;
}

}  // namespace kolo
