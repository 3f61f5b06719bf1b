// kolo-bench --device cuda --model NAME: one training step's gradient all-reduces of a real
// model (bench/models.h), with every gradient in GPU memory (one GPU per rank: local rank
// modulo the node's GPUs), three paths side by side in one run, as the host replay
// (bench/replay.h) does them:
//
//   kolo             kolo_allreduce_async_on_stream for every tensor in backward order, with the
//                    bench's stream as the framework's (a ready event each, as kolo.torch
//                    passes its current stream), then kolo_wait on every handle: negotiation,
//                    response cache, the device fusion buffer (batched pack, NCCL, batched
//                    unpack), completion through the finaliser
//   nccl-per-tensor  one raw ncclAllReduce per tensor, in the same order, on the bench's own
//                    stream and NCCL communicator, then one cudaStreamSynchronize
//   nccl-fused       one raw ncclAllReduce of the model's total bytes from a buffer that
//                    already holds them contiguously, then cudaStreamSynchronize: no copies, the
//                    floor that fusing aims at (kolo's fused path adds its pack and unpack)
//
// avg: raw paths run ncclSum and then a scaling pass (timed), as the host replay's MPI does;
// kolo divides in its unpack. Steps, warmup, interleaving, max over ranks and the check (-c 1:
// outputs poisoned, then every element compared, copied to the host) are the host replay's;
// the table and its time ratios are printed by Report::Model.
//
// Then the batched pack and unpack kernels (fusion/cuda/device_pack.h) on this model's layout
// (its tensors where the replay keeps them, 256-byte aligned) against one device-to-device
// cudaMemcpyAsync of the same bytes, timed with CUDA events (median of 20): the target is
// pack and unpack at >= 90% of the device copy bandwidth for ResNet-50.
//
// Builds without CUDA and NCCL, and machines without a GPU, fail the job with a clear message
// ("--device cuda: no CUDA device here (...)") and a non-zero exit instead.
#ifndef KOLO_BENCH_DEVICE_REPLAY_H_
#define KOLO_BENCH_DEVICE_REPLAY_H_

#include "bench/harness.h"
#include "bench/models.h"
#include "bench/replay.h"
#include "bench/report.h"

namespace kolo::bench {

// options.paths: any of "kolo", "nccl-per-tensor", "nccl-fused" (bench/mode.h checked them).
void RunDeviceReplay(const World& world, const ModelLayout& model, const ReplayOptions& options,
                     Report* report);

}  // namespace kolo::bench

#endif  // KOLO_BENCH_DEVICE_REPLAY_H_
