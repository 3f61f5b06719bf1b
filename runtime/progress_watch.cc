#include "runtime/progress_watch.h"

#include "base/logging.h"
#include "base/seconds_text.h"
#include "runtime/peer_watch.h"

namespace kolo {
namespace {

// "allreduce 'grad' (fused with 3 more)".
std::string Describe(const Response& response) {
  const char* op = "collective";
  switch (response.type) {
    case ResponseType::kAllreduce: op = "allreduce"; break;
    case ResponseType::kAllgather: op = "allgather"; break;
    case ResponseType::kBroadcast: op = "broadcast"; break;
    case ResponseType::kReducescatter: op = "reducescatter"; break;
    case ResponseType::kAlltoall: op = "alltoall"; break;
    case ResponseType::kBarrier: op = "barrier"; break;
    default: break;
  }
  const size_t n = response.NumTensors();
  std::string out = op;
  if (!response.names.empty()) {
    out += " '" + response.names[0] + "'";
    if (n > 1) out += " (fused with " + std::to_string(n - 1) + " more)";
  } else {
    out += " of " + std::to_string(n) + " fused tensors";
  }
  return out;
}

}  // namespace

Status ProgressWatch::Check(Clock::time_point since, const std::string& waiting_for,
                            Clock::time_point now) {
  if (!options_.enabled) return Status::OK();
  const double waited = std::chrono::duration<double>(now - since).count();
  // Described only now: the background thread sets a pointer per Response, no string.
  const std::string operation = negotiating_ ? std::string("negotiation")
                                : response_  ? Describe(*response_)
                                             : std::string("a collective");
  std::string what = operation + (algorithm_.empty() ? "" : " (" + std::string(algorithm_) + ")") +
                     " on rank " + std::to_string(rank_) + ": no progress for " +
                     TenthsText(waited) + " s waiting for " + waiting_for;
  if (const std::string stopped = StoppedPeers(); !stopped.empty()) {
    what += "; stopped on this host: " + stopped;
  }
  if (options_.shutdown_seconds > 0 && waited >= options_.shutdown_seconds) {
    failure_ = DeadlineExceededError(
        what + "; stalled for over " + SettingText(options_.shutdown_seconds) +
        " s (KOLO_STALL_SHUTDOWN_TIME_SECONDS=" + SettingText(options_.shutdown_seconds) +
        "): a rank that is " + "stopped, in a debugger or frozen, or a host overloaded");
    return failure_;
  }
  if (waited >= options_.check_seconds && since != warned_since_) {
    warned_since_ = since;
    KOLO_LOG_WARNING("stall",
                     "{} (over KOLO_STALL_CHECK_TIME_SECONDS={} s): is that rank "
                     "stopped, in a debugger or frozen?",
                     what, SettingText(options_.check_seconds));
  }
  return Status::OK();
}

}  // namespace kolo
