// A training step's gradients at scale, as the cost model sees them: kolo-scale's arithmetic.
//
// One step of data-parallel training on one GPU takes `compute_ms` (forward, then backward).
// During the backward pass the gradients become ready last layer first. The runtime runs one
// all-reduce at a time: when it is free, it fuses every gradient that is ready (up to the fusion
// threshold) into one buffer and all-reduces it. The step ends when the backward pass and the
// last all-reduce have both ended. Scaling efficiency is the step time alone over the step time
// with the all-reduces: the throughput per GPU at N GPUs over that at one.
//
//   forward   = (1 - backward_share) x compute
//   ready(t)  = forward + (index of t in backward order + 1) / tensors x backward
//               (gradients are ready evenly by tensor; a model that knew each layer's time
//               would move the buffers' boundaries, not the bytes)
//   seen(t)   = ready(t), as kolo with KOLO_WAKE_ON_SUBMIT=1 (a submission wakes the runtime);
//               with cycle_ms > 0 (Horovod, or KOLO_WAKE_ON_SUBMIT=0), the end of the cycle in
//               which t became ready
//   all-reduce k starts at max(end of all-reduce k-1, seen of its first tensor) and takes every
//               tensor seen by then, in backward order, while the fusion threshold allows
//   step      = max(compute, end of the last all-reduce)
//   after     = compute + the all-reduces of every gradient once the backward pass has ended, in
//               buffers of the fusion threshold (no overlap: what a framework without
//               background all-reduces does)
//
// Pure arithmetic: the time of one all-reduce of a given size comes from the caller (the cost
// model's formula for one algorithm). Unit-tested in tests/unit/scale_model_test.cc.
#ifndef KOLO_BENCH_SCALE_MODEL_H_
#define KOLO_BENCH_SCALE_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "bench/models.h"

namespace kolo::bench {

struct StepAssumptions {
  double compute_ms = 100;            // forward + backward of one step on one GPU
  double backward_share = 2.0 / 3.0;  // of compute_ms: backward costs about twice the forward
  double cycle_ms = 0;                // 0: woken by each submission (kolo's default)
  int64_t fusion_threshold_bytes = int64_t{128} << 20;  // KOLO_FUSION_THRESHOLD's default
  int element_bytes = 4;                                // float32 gradients
};

struct FusedBuffer {
  size_t bytes = 0;
  int tensors = 0;
  double start_ms = 0;  // from the start of the step
  double end_ms = 0;
};

struct StepPrediction {
  std::vector<FusedBuffer> allreduces;  // overlapped with the backward pass, in order
  double allreduce_ms = 0;              // their summed time
  double step_ms = 0;
  double efficiency = 0;     // compute / step
  int after_allreduces = 0;  // no overlap: the gradients in fusion-threshold buffers
  double after_step_ms = 0;
  double after_efficiency = 0;  // compute / after_step
};

// allreduce_us(bytes): the predicted time of one all-reduce of that many bytes.
StepPrediction PredictStep(const ModelLayout& model, const StepAssumptions& a,
                           const std::function<double(size_t bytes)>& allreduce_us);

}  // namespace kolo::bench

#endif  // KOLO_BENCH_SCALE_MODEL_H_
