// The nccl-tests-style size sweep: for each size from -b to -e (times -f, or plus -i), one
// collective (--collective; all-reduce by default, bench/collective.h) of that size on every path,
// side by side, out of place and in place:
//   mpi   the MPI collective on the bench's dup of MPI_COMM_WORLD (see dtypes.h for half and avg)
//   kolo  kolo's C API (kolo_allreduce_async ... + kolo_wait) through the whole runtime: enqueue,
//         negotiate, fuse, run, complete (one name per size and form, reused every iteration)
//
// Per size, for each path and form: one call whose output is checked (-c 1; the output is
// poisoned first), warmup-1 more calls, then `repeats` timed blocks of `iters` back-to-back calls
// (-z 1: a barrier after each call, like nccl-tests' blocking mode). The blocks of the paths and
// forms are interleaved and their order rotates (A B C D, B C D A, ...) so that drift on a noisy
// machine does not favour one of them. An in-place block starts from a fresh copy of the input
// (not timed). A block's time is its per-call mean, combined over ranks as -a says (default: the
// mean, as nccl-tests; -a 3 for the max, the slowest rank); the row shows the median block.
// With -c 1 one more checked call follows the timed blocks, so a path that is right on first use
// and wrong on reuse (e.g. a cache fast path) is caught too. A size of less than 16 bytes per
// rank (allgather, reducescatter, alltoall) is a row of count 0: the empty call is timed.
// All buffers are sized for -e, allocated and first-touched once, and reused by every size.
#ifndef KOLO_BENCH_SWEEP_H_
#define KOLO_BENCH_SWEEP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bench/dtypes.h"
#include "bench/harness.h"
#include "bench/report.h"
#include "bench/stats.h"

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
  Collective collective = Collective::kAllreduce;
  int root = 0;                             // broadcast
  RankCombine average = RankCombine::kAverage;  // -a 0..3
  bool blocking = false;                    // -z 1
  bool progress = true;                     // the progress line on rank 0's stderr when a terminal
};

// nccl-tests' sequence: min, then *factor (or +step) while <= max. Empty when min > max.
std::vector<int64_t> SweepSizes(int64_t min_bytes, int64_t max_bytes, double step_factor,
                                int64_t step_bytes);

void RunSweep(const World& world, const MpiAllreducer& mpi, const SweepOptions& options,
              Report* report);

}  // namespace kolo::bench

#endif  // KOLO_BENCH_SWEEP_H_
