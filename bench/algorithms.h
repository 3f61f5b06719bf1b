// `kolo-bench -a ring,rd,...|all`: every named all-reduce algorithm of the registry
// (collectives/select/registry.cc), run directly on an MpiCommunicator (not through the runtime), side
// by side with MPI_Allreduce itself, on the same input and output buffers, float32 sum.
//
// Per size, the variants are: MPI_Allreduce (as is: one call on the bench's communicator, no
// cutting into pieces, whatever the malloc variables say), each algorithm that Supports() the
// size, and a plain memcpy of the message (all ranks at once) that measures the copy bandwidth
// the shared-memory algorithm is bounded by. Each variant gets one checked call (output poisoned
// first), warmup-1 more calls (their time sets how many calls a timed block gets, so one block
// stays near 50 ms), then -R timed blocks, interleaved A B C, B C A, ... across variants; a
// block's time is its per-call mean, the max over ranks; rows show the median block. With
// --check the last timed block's output is checked too. The reference is computed locally from
// every rank's known input (bench/check.h; whole numbers, so any summation order is exact).
//
// Per size it also prints what AllreduceSelector (with KOLO_TUNING_FILE's cost model when set)
// would pick and how that pick's measured time compares with the best measured algorithm, and
// for "shm" the fraction of the memory bound: a single-copy all-reduce moves ~3S bytes per rank,
// so through memory it cannot beat 3S / copy_bw = 3 x the memcpy time. One that works in
// cache-sized pieces keeps most of that traffic in cache and can pass this bound (shown over
// 100%); the hard floor is one memcpy (read S, write S), so the row shows shm's time in memcpy
// times too.
#ifndef KOLO_BENCH_ALGORITHMS_H_
#define KOLO_BENCH_ALGORITHMS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/harness.h"
#include "bench/json_lines.h"
#include "bench/stats.h"
#include "collectives/mpi/mpi_communicator.h"

namespace kolo::bench {

struct AlgorithmsOptions {
  std::vector<std::string> names;  // registry names, or {"all"}
  std::vector<int64_t> sizes;      // bytes
  int iters = 20;                  // most calls per timed block
  int warmup = 5;
  int repeats = 5;
  bool check = true;
  std::string output;              // CSV for scripts/plot_algorithms.py; "" for none
  double block_target_us = 50000;  // fewer than `iters` calls when a block would run longer
  size_t max_call_bytes = size_t{16} << 20;
  JsonLines* json = nullptr;                // --json: one "row" record per printed row (not owned)
  RankCombine average = RankCombine::kMax;  // -a 0..3 / --average: timings over ranks
  // Also each algorithm over a UcxCommunicator ("ring/ucx"), interleaved with the MPI rows.
  bool ucx = false;
  // KOLO_SHM_STORES's word, as the runtime's settings read it: how shm and hierarchical store.
  std::string shm_stores = "auto";
};

// A communicator over a fresh dup of world.comm, cut into max_call_bytes pieces, with the node
// context of KOLO_NODE_GROUPING (or the hosts), so node-aware algorithms run. Fails the job on
// error. Collective.
std::unique_ptr<MpiCommunicator> MakeBenchCommunicator(const World& world, size_t max_call_bytes);
// --transport ucx: a UcxCommunicator over the same ranks (addresses exchanged over world.comm),
// with `mpi`'s node map, so the node-aware algorithms see the same nodes. Fails the job on error
// or in a build without UCX. Collective; destroy it before MPI_Finalize.
std::unique_ptr<Communicator> MakeUcxBenchCommunicator(const World& world,
                                                       const MpiCommunicator& mpi);

// The names `-a` accepts: the registry's, in table order.
std::vector<std::string> RegisteredAlgorithmNames();

// Prints the table (rank 0) and writes options.output. Returns the total #wrong over all ranks,
// sizes and variants (0 when not checked); an algorithm that returns an error fails the job.
int64_t RunAlgorithms(const World& world, const AlgorithmsOptions& options);

}  // namespace kolo::bench

#endif  // KOLO_BENCH_ALGORITHMS_H_
