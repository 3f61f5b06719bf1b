// Which of this rank's handles a caller is blocked on right now (Handle::Wait, WaitFor), for
// the deadlock check (runtime/negotiation/deadlock.h): a rank all of whose waits are for operations that
// cannot complete can make no progress of its own. Shared by the Runtime and its handles (a
// handle may outlive the Runtime). Any thread.
#ifndef KOLO_RUNTIME_WAIT_WATCH_H_
#define KOLO_RUNTIME_WAIT_WATCH_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace kolo {

class Handle;

class WaitWatch {
 public:
  void Enter(const Handle* h) {
    std::lock_guard<std::mutex> lock(mu_);
    ++waiting_[h];
    version_.fetch_add(1, std::memory_order_release);
  }
  void Leave(const Handle* h) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = waiting_.find(h);
    if (it != waiting_.end() && --it->second == 0) waiting_.erase(it);
    version_.fetch_add(1, std::memory_order_release);
  }
  // Changes whenever a wait starts or ends: the background thread looks again only then.
  uint64_t version() const { return version_.load(std::memory_order_acquire); }
  std::vector<const Handle*> Snapshot() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<const Handle*> out;
    out.reserve(waiting_.size());
    for (const auto& [h, n] : waiting_) out.push_back(h);
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<const Handle*, int> waiting_;  // handle -> threads waiting on it
  std::atomic<uint64_t> version_{0};
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_WAIT_WATCH_H_
