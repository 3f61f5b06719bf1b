// `kolo-bench --calibrate [--output FILE]`: measures this machine's cost-model parameters
// (collectives/select/cost_model.h) and writes the tuning file that KOLO_TUNING_FILE points the
// Selector at. A few seconds in all; every figure is a median of -R interleaved blocks.
//
//   intra  alpha, beta of point-to-point inside a node, as the flat algorithms pay it: a ring
//          step (every rank of rank 0's node sends m bytes to the next and receives m from the
//          previous, all at once, through MpiCommunicator::Start), m = 8 B .. 8 MiB (x4), max
//          over ranks of the median. alpha: the intercept of a least-squares line through the
//          steps <= 4 KiB; beta: the slope through the steps >= 1 MiB. One line through all
//          sizes does not fit (Open MPI's transport changes protocol at 4-8 KiB, and large
//          messages leave the caches); beta is what large messages pay, which is where it
//          decides. A ping-pong between two ranks (the former method) missed both the other
//          ranks' load (4 ranks on 2 cores: 4 us alpha by ping-pong, ~10 us in a ring step) and
//          the both-ways traffic of a ring (beta 1.9x too small at 2 MiB+).
//   inter  ping-pong between rank 0 and the first rank of another node (one-way = round trip
//          / 2, 8 B .. 2 MiB, fitted weighted by 1/t) when KOLO_NODE_GROUPING (or the hosts)
//          gives one; else inter = intra, and the output says so. Then each rank of rank 0's
//          node paired with its counterpart on that node (one pair where the node has one
//          rank), every pair swapping messages both ways at once; inter_sharing = that beta
//          over the lone ping-pong's (how much slower each flow is when all cross, both ways,
//          than alone; at least 1, and more than the pairs where sharing costs more than an
//          even split), and inter's beta is multiplied by it (each rank's share while all of
//          them cross, as recursive doubling's and halving's swaps do)
//   gamma  ReduceInto(float32 sum) of 256 KiB into 256 KiB (in cache), per byte, all ranks at once
//   copy   memcpy of 256 KiB (in cache), per byte, all ranks at once
//   copy_mem  memcpy of 32 MiB (past the caches), per byte, all ranks at once
//   cache_bytes  cpu0's last-level cache from sysfs (glibc's sysconf misreports it in this VM)
//   sync   the shm algorithm's flag barrier: its one-barrier path on one float, from a loop of
//          200 (the node's MPI_Barrier where the node cannot share memory)
//   algorithms  every host all-reduce algorithm that supports this run's layout (MPI's own as
//          "mpi"), float32 sum, 4 KiB .. 16 MiB (x4): the selector scales their formulas to
//          these times on that layout (collectives/select/measured_estimate.h)
// Per-rank figures are the max over ranks (the slowest rank is what a collective waits for).
#ifndef KOLO_BENCH_CALIBRATE_H_
#define KOLO_BENCH_CALIBRATE_H_

#include <string>

#include "bench/harness.h"

namespace kolo::bench {

struct CalibrateOptions {
  std::string output = "kolo_tuning.json";
  int repeats = 5;
  // KOLO_SHM_STORES's word: the shared-memory algorithms are timed storing as the runtime will.
  std::string shm_stores = "auto";
};

// Collective. Prints what it measured (rank 0), writes options.output (rank 0). Returns 0, or
// 1 when the file could not be written.
int RunCalibration(const World& world, const CalibrateOptions& options);

}  // namespace kolo::bench

#endif  // KOLO_BENCH_CALIBRATE_H_
