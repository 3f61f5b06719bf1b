// The stall inspector of the data plane. The stall inspector (stall_inspector.h) sees ranks that
// have not submitted a name; once every rank has and the data moves, a rank that stops answering
// (SIGSTOP, a debugger, a cgroup freezer, an overloaded host) is alive to the peer watch, so its
// peers would wait in a transfer forever. kolo's algorithms call Communicator::CheckProgress
// about once a second while a wait lasts; this watch answers it on the background thread:
//   - after KOLO_STALL_CHECK_TIME_SECONDS without the wait completing, one warning per wait
//     naming the operation, the algorithm step and the ranks it waits for;
//   - after KOLO_STALL_SHUTDOWN_TIME_SECONDS (when set), kDeadlineExceeded with the same
//     explanation, which ends the wait; the runtime then stops (failed() is set), as nothing
//     can be exchanged with that rank any more, and every pending and later operation fails with
//     this reason instead of hanging in the next negotiation.
// KOLO_STALL_CHECK_DISABLE turns it off, as it does the stall inspector.
#ifndef KOLO_RUNTIME_PROGRESS_WATCH_H_
#define KOLO_RUNTIME_PROGRESS_WATCH_H_

#include <chrono>
#include <string>
#include <string_view>

#include "base/status.h"
#include "protocol/message.h"
#include "runtime/negotiation/stall_inspector.h"

namespace kolo {

class ProgressWatch {
 public:
  using Clock = std::chrono::steady_clock;
  ProgressWatch(StallOptions options, int rank) : options_(options), rank_(rank) {}

  // What the background thread is doing now, set around each negotiation and each Response's
  // execution (`response` outlives the call to End); named only when a wait is reported.
  void BeginNegotiation() {
    End();
    negotiating_ = true;
  }
  void Begin(const Response* response) {
    End();
    response_ = response;
  }
  // The algorithm that moves it ("ring"), once chosen (a name with static storage).
  void set_algorithm(std::string_view algorithm) { algorithm_ = algorithm; }
  void End() {
    negotiating_ = false;
    response_ = nullptr;
    algorithm_ = {};
  }

  // Communicator::ProgressCheck: OK while the wait may go on.
  Status Check(Clock::time_point since, const std::string& waiting_for, Clock::time_point now);

  // The failure that ended a wait (not OK once one did).
  const Status& failure() const { return failure_; }

 private:
  const StallOptions options_;
  const int rank_;
  bool negotiating_ = false;
  const Response* response_ = nullptr;
  std::string_view algorithm_;
  Clock::time_point warned_since_{};  // the wait warned about last
  Status failure_;
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_PROGRESS_WATCH_H_
