// kolo-bench --device cuda: the sweep on GPU buffers, two paths side by side in one run, as
// nccl-tests' all_reduce_perf columns: "nccl", the raw ncclAllReduce on a communicator of all
// ranks (one GPU per rank: local rank modulo the node's GPUs) followed by a stream
// synchronize, and "kolo", the runtime's device path through the C API
// (kolo_allreduce_async_on_stream: negotiation, fusion buffer or in place, NCCL, completion).
// Same sizes, dtypes, ops, iterations and checks as the host sweep (bench/sweep.h); the
// results are copied to the host to count wrong elements. Builds without CUDA and NCCL, and
// machines without a GPU, get a clear error instead.
#ifndef KOLO_BENCH_DEVICE_SWEEP_H_
#define KOLO_BENCH_DEVICE_SWEEP_H_

#include "bench/report.h"
#include "bench/sweep.h"

namespace kolo::bench {

// Fails the job (bench/harness.h Fail) when there is no usable GPU or NCCL.
void RunDeviceSweep(const World& world, const SweepOptions& options, Report* report);

}  // namespace kolo::bench

#endif  // KOLO_BENCH_DEVICE_SWEEP_H_
