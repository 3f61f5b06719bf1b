#include "runtime/progress_watch.h"

#include <cstdio>

#include "base/logging.h"
#include "runtime/peer_watch.h"

namespace kolo {
namespace {

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", s);
  return buf;
}

std::string Setting(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", s);
  return buf;
}

}  // namespace

Status ProgressWatch::Check(Clock::time_point since, const std::string& waiting_for,
                            Clock::time_point now) {
  if (!options_.enabled) return Status::OK();
  const double waited = std::chrono::duration<double>(now - since).count();
  std::string what = (operation_.empty() ? std::string("a collective") : operation_) +
                     (algorithm_.empty() ? "" : " (" + algorithm_ + ")") + " on rank " +
                     std::to_string(rank_) + ": no progress for " + Seconds(waited) +
                     " s waiting for " + waiting_for;
  if (const std::string stopped = StoppedPeers(); !stopped.empty()) {
    what += "; stopped on this host: " + stopped;
  }
  if (options_.shutdown_seconds > 0 && waited >= options_.shutdown_seconds) {
    failure_ = DeadlineExceededError(what + "; stalled for over " +
                                     Setting(options_.shutdown_seconds) +
                                     " s (KOLO_STALL_SHUTDOWN_TIME_SECONDS=" +
                                     Setting(options_.shutdown_seconds) + "): a rank that is " +
                                     "stopped, in a debugger or frozen, or a host overloaded");
    return failure_;
  }
  if (waited >= options_.check_seconds && since != warned_since_) {
    warned_since_ = since;
    KOLO_LOG_WARNING("stall", "{} (over KOLO_STALL_CHECK_TIME_SECONDS={} s): is that rank "
                     "stopped, in a debugger or frozen?", what, Setting(options_.check_seconds));
  }
  return Status::OK();
}

}  // namespace kolo
