// The stall inspector (Horovod's stall_inspector.h, on the coordinator): a name that some ranks
// have submitted and others have not, for longer than KOLO_STALL_CHECK_TIME_SECONDS, is
// reported once at warning level with the ranks that have it and the ranks that are missing —
// the usual cause is a rank that took another branch, or skipped a parameter. After
// KOLO_STALL_SHUTDOWN_TIME_SECONDS (0 = never) such a name fails on every rank that submitted
// it with kDeadlineExceeded and the same explanation, so the job ends with a message instead
// of hanging.
//
// A cached name is negotiated without the coordinator; the controller sends a cache hit that
// waits too long (StallInspector::HoldLimit) to the coordinator, so it is inspected too.
#ifndef KOLO_RUNTIME_NEGOTIATION_STALL_INSPECTOR_H_
#define KOLO_RUNTIME_NEGOTIATION_STALL_INSPECTOR_H_

#include <chrono>
#include <string>
#include <unordered_set>
#include <vector>

#include "runtime/negotiation/coordinator.h"
#include "protocol/message.h"

namespace kolo {

struct StallOptions {
  bool enabled = true;           // !KOLO_STALL_CHECK_DISABLE
  double check_seconds = 60;     // KOLO_STALL_CHECK_TIME_SECONDS
  double shutdown_seconds = 0;   // KOLO_STALL_SHUTDOWN_TIME_SECONDS; 0 = never
};

class StallInspector {
 public:
  using Clock = std::chrono::steady_clock;
  explicit StallInspector(StallOptions options);

  // How long a rank may hold a cache hit that its peers have not matched before it goes to the
  // coordinator instead (where this inspector sees it): a quarter of the check time, at most
  // 5 s; forever when the inspector is off.
  Clock::duration HoldLimit() const;

  // Logs newly stalled names and returns the error Responses of names past the shutdown time
  // (taken out of `coordinator`). Cheap to call every cycle: it looks at the table at most
  // every tenth of the check time (and at most once a second).
  std::vector<Response> Inspect(Coordinator& coordinator, Clock::time_point now);

  // True when Inspect would look at the table now: the controller then takes the slow path
  // even if every tensor of the cycle was a cache hit.
  bool Due(Clock::time_point now) const { return options_.enabled && now >= next_check_; }

  // The warning line for one stalled name (exposed for tests).
  static std::string Describe(const Coordinator::Waiting& w, double waited_seconds);

 private:
  const StallOptions options_;
  Clock::duration interval_;
  Clock::time_point next_check_;
  std::unordered_set<std::string> warned_;
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_NEGOTIATION_STALL_INSPECTOR_H_
