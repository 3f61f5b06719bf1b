// The nccl-tests-style size sweep: for each size from -b to -e (times -f, or plus -i), one
// all-reduce of that many bytes on every path, side by side:
//   mpi   MPI_Allreduce on the bench's dup of MPI_COMM_WORLD (see dtypes.h for half and avg)
//   kolo  kolo_allreduce_async + kolo_wait through the whole runtime: enqueue, negotiate, fuse,
//         run, complete (one tensor per call, one name per size, reused every iteration)
//
// Per size, for each path: one call whose output is checked (-c 1; the output is poisoned
// first), warmup-1 more calls, then `repeats` timed blocks of `iters` back-to-back calls. The
// blocks of the paths are interleaved and their order alternates (A B, B A, A B, ...) so that
// drift on a noisy machine does not favour one path. A block's time is its per-call mean, taken
// as the max over ranks (a collective is done when its slowest rank is); the row shows the
// median block. With -c 1 the output of the last timed block is checked again, so a path that is
// right on first use and wrong on reuse (e.g. a cache fast path) is caught too.
// All buffers are sized for -e, allocated and first-touched once, and reused by every size.
#ifndef KOLO_BENCH_SWEEP_H_
#define KOLO_BENCH_SWEEP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bench/dtypes.h"
#include "bench/harness.h"
#include "bench/report.h"

namespace kolo::bench {

struct SweepOptions {
  int64_t min_bytes = 8;
  int64_t max_bytes = int64_t{64} << 20;
  int64_t step_bytes = 0;  // > 0: linear steps (nccl-tests' -i) instead of step_factor
  double step_factor = 4;
  int iters = 20;
  int warmup = 5;
  int repeats = 5;
  bool check = true;
  std::vector<const DtypeInfo*> dtypes;
  std::vector<const OpInfo*> ops;
  std::vector<std::string> paths;  // "mpi", "kolo"
};

// nccl-tests' sequence: min, then *factor (or +step) while <= max. Empty when min > max.
std::vector<int64_t> SweepSizes(int64_t min_bytes, int64_t max_bytes, double step_factor,
                                int64_t step_bytes);

void RunSweep(const World& world, const MpiAllreducer& mpi, const SweepOptions& options,
              Report* report);

}  // namespace kolo::bench

#endif  // KOLO_BENCH_SWEEP_H_
