// Online tuning of the fusion threshold and the cycle time (KOLO_AUTOTUNE=1), Horovod's
// autotune idea with a simpler, documented search instead of Bayesian optimisation:
//
//  - Score: bytes all-reduced per second of wall time at rank 0, over a sample of
//    `steps_per_sample` cycles that ran at least one all-reduce (the time between the first and
//    the last of them, so the gaps of the training loop count: a setting that delays work
//    scores lower). The first `warmup_samples` samples of the job, and the first sample after
//    every change of setting, are discarded (fusion buffers and caches settling).
//  - Search: coordinate descent over two grids. First the fusion threshold over
//    {0, 1, 4, 16, 64, 128} MiB at the starting cycle time, then the cycle time over
//    {0.5, 1, 2, 5, 10} ms at the best threshold; each setting gets `samples_per_trial` samples
//    and scores their median (robust to one noisy sample). Then the best setting of all trials
//    is kept for the rest of the job. With 11 trials of 2 samples of 10 steps, tuning ends after
//    ~250 steps. The two knobs interact weakly here (with KOLO_WAKE_ON_SUBMIT the cycle time
//    only bounds how long a lone submission waits), which is what makes one pass of coordinate
//    descent enough; tests/unit/autotune_test.cc shows it finds the optimum of synthetic score
//    surfaces, and docs/benchmarks.md compares its choice with a full sweep.
//
// Only rank 0 tunes; the controller sends each new setting to every rank in the ResponseList, so
// all ranks switch in the same cycle. Each finished trial is a line in KOLO_AUTOTUNE_LOG (CSV).
#ifndef KOLO_RUNTIME_NEGOTIATION_AUTOTUNE_H_
#define KOLO_RUNTIME_NEGOTIATION_AUTOTUNE_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace kolo {

struct TunedParams {
  int64_t fusion_threshold_bytes = 0;
  double cycle_time_ms = 0;
  bool operator==(const TunedParams& o) const {
    return fusion_threshold_bytes == o.fusion_threshold_bytes && cycle_time_ms == o.cycle_time_ms;
  }
};

struct AutotuneOptions {
  int warmup_samples = 3;     // KOLO_AUTOTUNE_WARMUP_SAMPLES
  int steps_per_sample = 10;  // KOLO_AUTOTUNE_STEPS_PER_SAMPLE
  int samples_per_trial = 2;
  std::string log_path;       // KOLO_AUTOTUNE_LOG; "" = no log
};

class Autotuner {
 public:
  using Clock = std::chrono::steady_clock;
  Autotuner(AutotuneOptions options, TunedParams start);
  ~Autotuner();

  // Opens the log (a clear error for an unwritable path).
  Status Open();

  // One cycle that all-reduced `bytes` (> 0) ending at `now`. Returns the next setting to
  // apply when a trial ends (or tuning does).
  std::optional<TunedParams> Record(int64_t bytes, Clock::time_point now);

  bool done() const { return done_; }
  const TunedParams& current() const { return current_; }
  const TunedParams& best() const { return best_; }

 private:
  struct Trial {
    TunedParams params;
    double score = 0;
  };
  std::optional<TunedParams> EndTrial();

  const AutotuneOptions options_;
  std::vector<TunedParams> queue_;  // settings still to try in this phase
  int phase_ = 0;                   // 0: threshold grid, 1: cycle grid
  TunedParams current_;
  TunedParams best_;
  double best_score_ = -1;
  bool done_ = false;
  int warmup_left_;
  // The sample being measured.
  int steps_ = 0;
  int64_t bytes_ = 0;
  Clock::time_point first_;
  std::vector<double> scores_;  // samples of the current trial
  std::vector<Trial> trials_;
  std::FILE* log_ = nullptr;
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_NEGOTIATION_AUTOTUNE_H_
