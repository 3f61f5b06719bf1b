// Where each element of a collective's buffers comes from, as pure index arithmetic (no MPI, no
// dtype), so the mapping that the sweep's inputs and checks use is unit-tested on its own
// (tests/unit/bench_collective_index_test.cc) and a misplaced chunk is shown to be caught.
//
// A value is named by check.h's pattern: Input(rank, index) or the reduction over ranks
// Expected(index). With c = count (nccl-tests' per-rank count, stats.h: LayoutFor) and n ranks:
//
//   collective     send element j of rank r        recv element j of rank r
//   allreduce      Input(r, j)                     Expected(j)
//   reducescatter  Input(r, j)                     Expected(r*c + j)
//   allgather      Input(r, r*c + j)               Input(j/c, j)
//   broadcast      Input(r, j)                     Input(root, j)
//   alltoall       Input(r, (d*n + r)*c + k)       Input(s, (r*n + s)*c + k)
//                  (chunk d = j/c, k = j%c)        (chunk from s = j/c, k = j%c)
//
// so every element of the gathered (or exchanged) whole has its own index and a chunk written at
// the wrong offset, or taken from the wrong rank, differs from what is expected there.
#ifndef KOLO_BENCH_COLLECTIVE_INDEX_H_
#define KOLO_BENCH_COLLECTIVE_INDEX_H_

#include <cstdint>
#include <functional>

#include "bench/stats.h"

namespace kolo::bench {

struct PatternElement {
  bool reduced = false;  // true: Expected(index); false: Input(rank, index)
  int rank = 0;
  int64_t index = 0;
};

// The value rank `rank` of `nranks` writes at element j of its (out-of-place) send buffer.
PatternElement SendElement(Collective c, int rank, int nranks, int root, int64_t count, int64_t j);
// The value a correct collective leaves at element j of rank `rank`'s receive buffer.
PatternElement RecvElement(Collective c, int rank, int nranks, int root, int64_t count, int64_t j);

// How many of the `recv_count` elements got(j) differ from want(RecvElement(..., j)); the first
// such j goes to *first_bad when non-null (left alone when none). NaN never compares equal.
int64_t CountWrongElements(Collective c, int rank, int nranks, int root, int64_t count,
                           int64_t recv_count, const std::function<double(int64_t)>& got,
                           const std::function<double(const PatternElement&)>& want,
                           int64_t* first_bad);

}  // namespace kolo::bench

#endif  // KOLO_BENCH_COLLECTIVE_INDEX_H_
