#include "bench/scale_model.h"

#include <algorithm>
#include <cmath>

namespace kolo::bench {

StepPrediction PredictStep(const ModelLayout& model, const StepAssumptions& a,
                           const std::function<double(size_t bytes)>& allreduce_us) {
  const std::vector<int> order = BackwardOrder(model);
  const size_t n = order.size();
  const double forward_ms = (1.0 - a.backward_share) * a.compute_ms;
  const double backward_ms = a.backward_share * a.compute_ms;
  std::vector<size_t> bytes(n);
  std::vector<double> seen(n);
  for (size_t i = 0; i < n; ++i) {
    bytes[i] = static_cast<size_t>(model.tensors[order[i]].NumElements()) * a.element_bytes;
    double ready = (static_cast<double>(i) + 1.0) / static_cast<double>(n) * backward_ms;
    if (a.cycle_ms > 0) ready = std::ceil(ready / a.cycle_ms - 1e-9) * a.cycle_ms;
    seen[i] = forward_ms + ready;
  }
  const auto fits = [&](size_t have, size_t add) {
    return have == 0 || static_cast<int64_t>(have + add) <= a.fusion_threshold_bytes;
  };

  StepPrediction p;
  double free_ms = 0;
  for (size_t i = 0; i < n;) {
    FusedBuffer b;
    b.start_ms = std::max(free_ms, seen[i]);
    for (; i < n && seen[i] <= b.start_ms && fits(b.bytes, bytes[i]); ++i) {
      b.bytes += bytes[i];
      ++b.tensors;
    }
    b.end_ms = b.start_ms + allreduce_us(b.bytes) / 1000.0;
    free_ms = b.end_ms;
    p.allreduce_ms += b.end_ms - b.start_ms;
    p.allreduces.push_back(b);
  }
  p.step_ms = std::max(a.compute_ms, free_ms);
  p.efficiency = a.compute_ms / p.step_ms;

  double after_ms = 0;
  for (size_t i = 0; i < n;) {
    size_t buffer = 0;
    for (; i < n && fits(buffer, bytes[i]); ++i) buffer += bytes[i];
    after_ms += allreduce_us(buffer) / 1000.0;
    ++p.after_allreduces;
  }
  p.after_step_ms = a.compute_ms + after_ms;
  p.after_efficiency = a.compute_ms / p.after_step_ms;
  return p;
}

}  // namespace kolo::bench
