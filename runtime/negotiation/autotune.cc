#include "runtime/negotiation/autotune.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/logging.h"

namespace kolo {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
const int64_t kThresholds[] = {0, 1 * kMiB, 4 * kMiB, 16 * kMiB, 64 * kMiB, 128 * kMiB};
const double kCycleTimes[] = {0.5, 1, 2, 5, 10};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

Autotuner::Autotuner(AutotuneOptions options, TunedParams start)
    : options_(std::move(options)), current_(start), best_(start),
      warmup_left_(options_.warmup_samples) {
  for (int64_t t : kThresholds) {
    queue_.push_back(TunedParams{t, start.cycle_time_ms});
  }
  // The first trial is the first grid point; the job's own setting is measured during warmup
  // only, so it competes like any other point of the grid.
  current_ = queue_.front();
  queue_.erase(queue_.begin());
}

Autotuner::~Autotuner() {
  if (log_) std::fclose(log_);
}

Status Autotuner::Open() {
  if (options_.log_path.empty()) return Status::OK();
  log_ = std::fopen(options_.log_path.c_str(), "w");
  if (!log_) {
    return InvalidArgumentError("KOLO_AUTOTUNE_LOG='" + options_.log_path +
                                "': cannot open for writing: " + std::strerror(errno));
  }
  std::fprintf(log_, "trial,fusion_threshold_bytes,cycle_time_ms,score_bytes_per_s,samples\n");
  std::fflush(log_);
  return Status::OK();
}

std::optional<TunedParams> Autotuner::Record(int64_t bytes, Clock::time_point now) {
  if (done_ || bytes <= 0) return std::nullopt;
  if (steps_ == 0) first_ = now;
  ++steps_;
  bytes_ += bytes;
  if (steps_ < options_.steps_per_sample) return std::nullopt;
  const double seconds = std::chrono::duration<double>(now - first_).count();
  const double score = seconds > 0 ? static_cast<double>(bytes_) / seconds : 0;
  steps_ = 0;
  bytes_ = 0;
  if (warmup_left_ > 0) {
    --warmup_left_;
    return std::nullopt;
  }
  scores_.push_back(score);
  if (static_cast<int>(scores_.size()) < options_.samples_per_trial) return std::nullopt;
  return EndTrial();
}

std::optional<TunedParams> Autotuner::EndTrial() {
  const double score = Median(scores_);
  trials_.push_back(Trial{current_, score});
  if (log_) {
    std::fprintf(log_, "%zu,%lld,%g,%.6g,%zu\n", trials_.size(),
                 static_cast<long long>(current_.fusion_threshold_bytes), current_.cycle_time_ms,
                 score, scores_.size());
    std::fflush(log_);
  }
  KOLO_LOG_INFO("autotune", "trial {}: fusion threshold {} bytes, cycle time {} ms: {:.4g} B/s",
                trials_.size(), current_.fusion_threshold_bytes, current_.cycle_time_ms, score);
  scores_.clear();
  if (score > best_score_) {
    best_score_ = score;
    best_ = current_;
  }
  if (queue_.empty() && phase_ == 0) {
    phase_ = 1;
    for (double c : kCycleTimes) {
      if (c != best_.cycle_time_ms) queue_.push_back(TunedParams{best_.fusion_threshold_bytes, c});
    }
  }
  if (queue_.empty()) {
    done_ = true;
    current_ = best_;
    KOLO_LOG_INFO("autotune", "done after {} trials: fusion threshold {} bytes, cycle time {} ms",
                  trials_.size(), best_.fusion_threshold_bytes, best_.cycle_time_ms);
    if (log_) {
      std::fprintf(log_, "best,%lld,%g,%.6g,\n",
                   static_cast<long long>(best_.fusion_threshold_bytes), best_.cycle_time_ms,
                   best_score_);
      std::fflush(log_);
    }
    return best_;
  }
  current_ = queue_.front();
  queue_.erase(queue_.begin());
  warmup_left_ = 1;  // the first sample after a change is not representative
  return current_;
}

}  // namespace kolo
