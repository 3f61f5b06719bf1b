// --model: replays one training step's gradient all-reduces of a real model (bench/models.h).
// Every step hands all of the model's gradients to each path in backward order (last layer
// first, as backpropagation produces them) and times the step until every result is there:
//
//   kolo            kolo_allreduce_async for every tensor as it "arrives", then kolo_wait on
//                   every handle: the whole runtime (negotiation, response cache, fusion, the
//                   selected algorithm, completion)
//   mpi-per-tensor  one blocking MPI_Allreduce per tensor, in the same order
//   mpi-fused       pack every tensor into one buffer (memcpy), one in-place MPI_Allreduce,
//                   unpack (memcpy): Horovod's fusion done by hand, copies included
//   memcpy          no all-reduce: every tensor copied from its input into an output of its
//                   own, on every rank at once. Any out-of-place all-reduce reads each input
//                   and writes each output at least once, so this is the set's memory floor
//
// Paths are interleaved step by step, rotating which goes first; each step is timed between a
// barrier and the last completion on this rank, and the step time is the max over ranks. The
// table shows the median over `steps` after `warmup` (and min and max). With -c 1 the outputs of
// the first warmup step and of the last timed step are poisoned beforehand and checked element by
// element (check.h), per path. Inputs and outputs are one arena per role, tensors at 256-byte
// aligned offsets, allocated and first-touched once.
#ifndef KOLO_BENCH_REPLAY_H_
#define KOLO_BENCH_REPLAY_H_

#include <string>
#include <vector>

#include "bench/dtypes.h"
#include "bench/harness.h"
#include "bench/models.h"
#include "bench/report.h"

namespace kolo::bench {

struct ReplayOptions {
  int steps = 20;
  int warmup = 5;
  bool check = true;
  const DtypeInfo* dtype = nullptr;
  const OpInfo* op = nullptr;
  std::vector<std::string> paths;  // "kolo", "mpi-per-tensor", "mpi-fused", "memcpy"
};

void RunReplay(const World& world, const MpiAllreducer& mpi, const ModelLayout& model,
               const ReplayOptions& options, Report* report);

// A replay's table row: per path the median, min and max of the timed step times (each the
// max over ranks; samples[p] holds this rank's, options.steps of them) and #wrong summed over
// ranks. Collective over `world`. Shared by the host and the device replays.
ModelResult SummarizeReplay(const World& world, const ModelLayout& model,
                            const ReplayOptions& options, const std::string& description,
                            int64_t total_count, const std::vector<std::vector<double>>& samples,
                            const std::vector<int64_t>& wrong);

}  // namespace kolo::bench

#endif  // KOLO_BENCH_REPLAY_H_
