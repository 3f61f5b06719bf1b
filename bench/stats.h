// The arithmetic of kolo-bench's algorithm comparison and calibration, kept apart from MPI so it
// is unit-tested (tests/unit/bench_stats_test.cc): bandwidths, the least-squares line of the
// alpha-beta fit, how many calls a timed block gets, and the CSV that scripts/plot_algorithms.py
// reads.
#ifndef KOLO_BENCH_STATS_H_
#define KOLO_BENCH_STATS_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace kolo::bench {

// bytes / time in GB/s (1e9 bytes per second); 0 when time_us <= 0.
double AlgBwGBs(int64_t bytes, double time_us);
// nccl-tests' all-reduce bus bandwidth: algbw * 2(p-1)/p, the rate each rank's link must carry
// for the ring to take this long (0 for p < 1).
double AllreduceBusBwGBs(double algbw, int ranks);

// The collectives of the sweep, as nccl-tests has them (all_reduce_perf, all_gather_perf, ...).
enum class Collective { kAllreduce, kAllgather, kBroadcast, kReducescatter, kAlltoall };

// "allreduce", "allgather", "broadcast", "reducescatter", "alltoall".
const char* CollectiveName(Collective c);
// The names above, nccl-tests' spellings with underscores ("all_reduce", "reduce_scatter") and its
// executables' names ("all_gather_perf"). False for anything else.
bool ParseCollective(const std::string& text, Collective* c);
// The collective an executable's name asks for: ".../all_gather_perf" -> kAllgather; false for
// any other name (kolo-bench itself).
bool CollectiveFromProgramName(const std::string& argv0, Collective* c);
// "allreduce|allgather|broadcast|reducescatter|alltoall" for --help and error messages.
std::string CollectiveNameList();
bool CollectiveReduces(Collective c);  // allreduce, reducescatter: -o applies
bool CollectiveHasRoot(Collective c);  // broadcast: -r applies

// nccl-tests' buffers for one size of the sweep (its GetCollByteCount), in elements of one rank:
//   allreduce, broadcast     send = recv = count = size / type
//   allgather                send = count, recv = n * count           count = base
//   reducescatter            send = n * count, recv = count           count = base
//   alltoall                 send = recv = n * count (count per peer) count = base
// with base = (size / type / n) rounded down to a multiple of 16 bytes (16 / type elements), as
// nccl-tests has done since v2.13.12. `count` is the printed count; `bytes` the printed size: the
// larger of send and recv in bytes. A count of 0 is a row too (nccl-tests times the empty call).
struct CollectiveLayout {
  int64_t count = 0;
  int64_t send = 0;
  int64_t recv = 0;
  int64_t bytes = 0;
};
CollectiveLayout LayoutFor(Collective c, int64_t size, int64_t type_size, int ranks);
// nccl-tests' bus bandwidth factor (busbw = algbw * factor, algbw = bytes / time):
// allreduce 2(n-1)/n, allgather, reducescatter and alltoall (n-1)/n, broadcast 1.
double BusBwFactor(Collective c, int ranks);

// nccl-tests' -a: how one timing is combined over ranks (its "average" mode).
enum class RankCombine { kRank0 = 0, kAverage = 1, kMin = 2, kMax = 3 };
const char* RankCombineName(RankCombine mode);  // "rank 0", "mean", "min", "max"

// y = intercept + slope * x by weighted least squares over (x[i], y[i]) (weights empty: all 1);
// ok false when fewer than two distinct x (or a weight list shorter than x). Weights let a fit
// over sizes from bytes to MiBs not be decided by the largest time alone (bench/calibrate.h).
struct LineFit {
  double intercept = 0;
  double slope = 0;
  double r2 = 0;  // coefficient of determination (1 when y lies on the line)
  bool ok = false;
};
LineFit FitLine(const std::vector<double>& x, const std::vector<double>& y,
                const std::vector<double>& weights = {});

// Calls in one timed block: as many as -n allows while a block stays near target_us (so the
// 64 MiB rows do not take minutes), at least one. per_call_us <= 0 means "unknown": max_iters.
int BlockIters(double per_call_us, double target_us, int max_iters);

// One row of `kolo-bench -a`: one algorithm (or the MPI_Allreduce baseline) at one size.
struct AlgorithmRow {
  int ranks = 0;
  int64_t bytes = 0;
  int64_t count = 0;
  std::string algorithm;
  bool supported = true;
  std::string reason;    // why not, when !supported
  double time_us = 0;    // median over the timed blocks, max over ranks
  double min_us = 0;
  double max_us = 0;
  int iters = 0;         // calls per timed block
  double algbw = 0;      // GB/s
  double busbw = 0;      // GB/s
  double vs_mpi = 0;     // busbw / MPI_Allreduce's busbw at this size (0: unknown)
  int64_t wrong = -1;    // summed over ranks; -1 when not checked
  double model_us = -1;  // the cost model's prediction (-1: none)
  bool selected = false;          // the selector's pick at this size
  double bound_fraction = -1;     // shm: memory-bandwidth bound time / measured time (-1: n/a)
};

// RFC 4180 field: quoted (with "" for ") when it holds a comma, quote or line break.
std::string CsvField(const std::string& text);
// '#'-prefixed comment lines, then a header line and one line per row. Columns: ranks, bytes,
// count, algorithm, supported, time_us, min_us, max_us, iters, algbw_gbs, busbw_gbs, vs_mpi,
// wrong, model_us, selected, bound_fraction, reason. Unknown numbers are empty fields.
void WriteAlgorithmsCsv(std::ostream& out, const std::vector<std::string>& comments,
                        const std::vector<AlgorithmRow>& rows);

}  // namespace kolo::bench

#endif  // KOLO_BENCH_STATS_H_
