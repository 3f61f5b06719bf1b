// `kolo-bench --calibrate [--output FILE]`: measures this machine's cost-model parameters
// (collectives/cost_model.h) and writes the tuning file that KOLO_TUNING_FILE points the
// Selector at. A few seconds in all; every figure is a median of -R interleaved blocks.
//
//   intra  alpha, beta of point-to-point inside a node: ping-pong between rank 0 and the next
//          rank of its node over 8 B .. 2 MiB through MpiCommunicator::Start (what the
//          algorithms pay), one-way time = round trip / 2, fitted to t = alpha + n beta by
//          least squares weighted by 1/t. Unweighted, the 2 MiB point alone decides alpha
//          (tens of us, 25x the 8 B time); weighted 1/t^2 (relative error), the many small
//          sizes decide beta too and it misses 2 MiB by 1.5x; 1/t keeps alpha within ~1.5x of
//          the small times and beta within ~10% of the large ones (here, Open MPI's shared-
//          memory transport switching protocol at 4-8 KiB is not a straight line).
//   inter  the same between rank 0 and the first rank of another node when KOLO_NODE_GROUPING
//          (or the hosts) gives one; else inter = intra, and the output says so
//   gamma  ReduceInto(float32 sum) of 8 MiB into 8 MiB, per byte, all ranks at once
//   copy   memcpy of 8 MiB, per byte, all ranks at once
//   sync   one MPI_Barrier of the node-local communicator, from a loop of 200
// Per-rank figures are the max over ranks (the slowest rank is what a collective waits for).
#ifndef KOLO_BENCH_CALIBRATE_H_
#define KOLO_BENCH_CALIBRATE_H_

#include <string>

#include "bench/harness.h"

namespace kolo::bench {

struct CalibrateOptions {
  std::string output = "kolo_tuning.json";
  int repeats = 5;
};

// Collective. Prints what it measured (rank 0), writes options.output (rank 0). Returns 0, or
// 1 when the file could not be written.
int RunCalibration(const World& world, const CalibrateOptions& options);

}  // namespace kolo::bench

#endif  // KOLO_BENCH_CALIBRATE_H_
