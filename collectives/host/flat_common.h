// Pieces shared by the flat point-to-point all-reduces (ring, recursive doubling,
// Rabenseifner): the even split of a buffer into blocks, scratch that only grows, the check
// that an op is one the reduction kernels do, and the fold of a non-power-of-two rank count
// onto a power of two (Thakur, Rabenseifner & Gropp 2005, sec. 4.1 and 4.4).
//
// The fold. With p = 2^k + r (0 <= r < 2^k), the first 2r ranks pair up as (2i, 2i+1). Before
// the power-of-two part, each odd one sends its whole vector to its even partner, which
// reduces (even's data) op (odd's data) and stands in for both; the odd ones sit out. The
// 2^k remaining ranks get new ranks 0..2^k-1 in the order of their real ranks:
//
//     real rank   0 1 | 2 3 | 4 5 | 6        (p = 7: 2^k = 4, r = 3)
//     new rank    0 - | 1 - | 2 - | 3
//
// After the power-of-two part every even partner sends the result back to its odd partner.
// Cost of the fold: two extra steps, alpha + n beta + n gamma before and alpha + n beta after.
#ifndef KOLO_COLLECTIVES_HOST_FLAT_COMMON_H_
#define KOLO_COLLECTIVES_HOST_FLAT_COMMON_H_

#include <cstddef>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "collectives/algorithm.h"
#include "collectives/communicator.h"

namespace kolo::internal {

// Block i of `count` elements split into `blocks` near-equal blocks: the first count % blocks
// blocks hold one element more. Every rank computes the same split.
inline size_t BlockCount(size_t count, size_t blocks, size_t i) {
  return count / blocks + (i < count % blocks ? 1 : 0);
}
inline size_t BlockOffset(size_t count, size_t blocks, size_t i) {
  const size_t extra = count % blocks;
  return i * (count / blocks) + (i < extra ? i : extra);
}

// A pointer to at least `bytes` bytes of `scratch`, growing it if needed; never shrinks, so a
// steady workload allocates (and first-touches) once (docs/machine-notes.md 1).
char* GrowScratch(std::vector<char>* scratch, size_t bytes);

// OK when ReduceInto can do in.op; kUnimplemented naming `algorithm` otherwise.
Status SupportsKernelOp(std::string_view algorithm, const SelectionInput& in);

// floor(log2(p)) and 2^floor(log2(p)) for p >= 1.
int FloorLog2(int p);

// Recursive halving then doubling over `pof2` ranks (a power of two), nearest partner first: the
// step at distance d moves half of what the one before moved, each way, at StepLink(in, d)'s
// alpha and beta, and reduces what it receives. Rabenseifner's cost without its fold.
double HalvingDoublingMicros(const SelectionInput& in, int pof2);

// This rank's place in the fold (see the top of this file).
struct Pof2Fold {
  int pof2 = 1;      // 2^k, the ranks of the power-of-two part
  int rem = 0;       // p - 2^k: the pairs that fold
  int newrank = -1;  // rank in the power-of-two part; -1 for an odd rank that sits out

  static Pof2Fold Of(int rank, int size);
  // The real rank of power-of-two rank `nr`.
  int RealRank(int nr) const { return nr < rem ? 2 * nr : nr + rem; }
};

// The fold's first step on `buf` (count elements): odd partners send, even partners receive
// into `tmp` (count elements) and reduce (even op odd) into `buf`. No-op without a partner.
Status FoldIn(Communicator& comm, const Pof2Fold& fold, char* buf, char* tmp, size_t count,
              DataType dtype, ReduceOp op, int tag);
// The fold's last step: even partners send `buf` to their odd partner, which receives it.
Status FoldOut(Communicator& comm, const Pof2Fold& fold, char* buf, size_t bytes, int tag);

}  // namespace kolo::internal

#endif  // KOLO_COLLECTIVES_HOST_FLAT_COMMON_H_
