#include "runtime/negotiation/stall_inspector.h"

#include <algorithm>
#include <cmath>

#include "base/logging.h"
#include "base/seconds_text.h"

namespace kolo {
namespace {

std::chrono::steady_clock::duration ToDuration(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

// A waited time: whole seconds, or one decimal below 10 s.
std::string Whole(double s) {
  return s >= 10 ? std::to_string(static_cast<long long>(std::floor(s))) : TenthsText(s);
}

}  // namespace

StallInspector::StallInspector(StallOptions options) : options_(options) {
  interval_ = std::min(ToDuration(options_.check_seconds / 10), ToDuration(1.0));
  next_check_ = Clock::now();
}

StallInspector::Clock::duration StallInspector::HoldLimit() const {
  if (!options_.enabled) return Clock::duration::max();
  return std::min(ToDuration(options_.check_seconds / 4), ToDuration(5.0));
}

std::string StallInspector::Describe(const Coordinator::Waiting& w, double waited_seconds) {
  return OpLabel(w.op, w.name) + ": submitted by " + RanksPhrase(w.ready) +
         ", missing ranks: " + RankList(w.missing) + " (waiting " + Whole(waited_seconds) + " s)";
}

std::vector<Response> StallInspector::Inspect(Coordinator& coordinator, Clock::time_point now) {
  std::vector<Response> failed;
  if (!options_.enabled || now < next_check_ || coordinator.pending() == 0) return failed;
  next_check_ = now + interval_;
  std::vector<std::string> lines;
  size_t stalled = 0;
  for (const Coordinator::Waiting& w : coordinator.Pending()) {
    if (w.missing.empty()) continue;
    const double waited = std::chrono::duration<double>(now - w.since).count();
    if (options_.shutdown_seconds > 0 && waited >= options_.shutdown_seconds) {
      const std::string why =
          Describe(w, waited) + "; failed after " +
          "KOLO_STALL_SHUTDOWN_TIME_SECONDS=" + SettingText(options_.shutdown_seconds);
      KOLO_LOG_ERROR("stall", "{}", why);
      warned_.erase(w.name);
      for (Response& r : coordinator.Fail(w.name, StatusCode::kDeadlineExceeded, "stalled: " + why)) {
        failed.push_back(std::move(r));
      }
      continue;
    }
    if (waited < options_.check_seconds || warned_.count(w.name)) continue;
    warned_.insert(w.name);
    ++stalled;
    if (lines.size() < 20) lines.push_back(Describe(w, waited));
  }
  if (stalled) {
    std::string msg = std::to_string(stalled) +
                      " tensor(s) submitted by some ranks but not by others for over " +
                      SettingText(options_.check_seconds) +
                      " s (KOLO_STALL_CHECK_TIME_SECONDS); a rank may have taken another "
                      "branch or skipped a tensor:";
    for (const std::string& l : lines) msg += "\n  " + l;
    if (stalled > lines.size()) {
      msg += "\n  ... and " + std::to_string(stalled - lines.size()) + " more";
    }
    KOLO_LOG_WARNING("stall", "{}", msg);
  }
  // Forget warnings of names that completed, so a later stall of the same name is reported.
  if (!warned_.empty()) {
    std::unordered_set<std::string> still;
    for (const Coordinator::Waiting& w : coordinator.Pending()) {
      if (warned_.count(w.name)) still.insert(w.name);
    }
    warned_.swap(still);
  }
  return failed;
}

}  // namespace kolo
