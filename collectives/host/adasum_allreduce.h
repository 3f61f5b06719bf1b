// Adasum all-reduce: the adaptive summation of Maleki et al., "Adasum: Adaptive Summation of
// Gradients for Deep Learning" (MLSys 2021), on Horovod's vector-halving distance-doubling
// schedule (horovod/common/ops/adasum/adasum.h, AdasumMPI).
//
// Two gradients combine as
//     Adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b
// so orthogonal vectors add and equal ones average. A coefficient whose squared norm is below
// sqrt(DBL_MIN) is 1 (Horovod's rule): a zero vector is the identity instead of a NaN. The
// combination is not elementwise, so it is not associative and the tree is part of the result:
// p = 2^k ranks combine over the binary tree of ranks, the lower-ranked side on the left,
//     level 1: (x0, x1), (x2, x3), ...   level 2: (x01, x23), (x45, x67), ...   and so on,
// giving Adasum(Adasum(x0, x1), Adasum(x2, x3)) at 4 ranks. Only powers of two run (as in
// Horovod); other counts get kUnimplemented naming the count (CheckAdasumRanks).
//
// Schedule. Every rank keeps a window [lo, hi) of the vector, at first all of it, in a buffer
// laid out like the user's; the window shrinks by halving, the lower rank of a pair keeping the
// first floor(len / 2) elements, as Horovod does. At level d = 1, 2, 4, ..., p/2:
//
//     step                    partner     rank r
//     halving   d = 1..p/2    r XOR d     sends the half the partner keeps, receives the
//                                         partner's copy of the half it keeps (into scratch);
//                                         partial a.b, |a|^2, |b|^2 of every tensor over that
//                                         half; sums them with the 2d ranks of its aligned
//                                         block [r - r mod 2d, +2d) (recursive doubling over
//                                         r XOR 1, r XOR 2, .., r XOR d: 3 doubles per tensor);
//                                         kept = ca * mine + cb * partner's
//     doubling  d = p/2..1    r XOR d     sends its window, receives the partner's (the other
//                                         half of the window both had before halving step d)
//
// Why the block sum is the whole dot product: before level d the d ranks of each half of the
// block hold disjoint pieces of one vector (the left half's combination, or the right's), laid
// out alike; after the exchange each of the 2d ranks holds one piece of both vectors, and the
// pieces tile the vector. Every rank of the block ends the sum with the same bits (each step
// adds two values and x + y == y + x), so both ends of a piece use one pair of coefficients.
// Each element of the result is computed once, by its owner, and then only copied.
//
// A fused buffer keeps its tensors apart: `tensor_counts` gives their lengths, and the sums and
// coefficients are per tensor (a window cuts a tensor where it ends). Arithmetic: products and
// sums in double; float16 and float32 elements are combined in double and rounded once per
// level (the runtime hands float32 for float16/bfloat16 tensors, rounding once at the end).
//
// Bytes sent per rank: 2 (p-1)/p n, plus 24 T bytes (T tensors) per step of the block sums.
// Messages: 2 log2(p) for the data, log2(p) (log2(p) + 1) / 2 for the sums. Cost (n in bytes,
// one tensor; each level reads its half twice: the dot products, then the combination):
//     T = (2 log2 p + log2 p (log2 p + 1) / 2) alpha + 2 (p-1)/p n beta + 2 (p-1)/p n gamma
// which is Rabenseifner's halving and doubling (Thakur, Rabenseifner & Gropp 2005) plus the
// latency of the small sums and a second pass over the data.
#ifndef KOLO_COLLECTIVES_HOST_ADASUM_ALLREDUCE_H_
#define KOLO_COLLECTIVES_HOST_ADASUM_ALLREDUCE_H_

#include <vector>

#include "collectives/algorithm.h"

namespace kolo {

// OK for a power-of-two rank count; kUnimplemented naming `ranks` otherwise.
Status CheckAdasumRanks(int ranks);

// Not in the Selector's table (collectives/select/registry.cc): Adasum is a different reduction, not
// another way to sum, so the runtime runs it for ReduceOp::kAdasum whatever
// KOLO_ALLREDUCE_ALGO forces for the other ops.
class AdasumAllreduce : public AllreduceAlgorithm {
 public:
  std::string_view Name() const override { return "adasum"; }
  // OK for op kAdasum, float16/float32/float64, host memory and a power-of-two rank count.
  Status Supports(const SelectionInput& in) const override;
  double EstimateMicros(const SelectionInput& in) const override;
  // args.op must be kAdasum; the buffer is one tensor.
  Status Run(Communicator& comm, const AllreduceArgs& args) override;
  // The buffer holds tensors of tensor_counts[i] elements back to back (summing to
  // args.count); each is combined with its own dot products and norms. Every rank passes the
  // same counts.
  Status RunFused(Communicator& comm, const AllreduceArgs& args,
                  const std::vector<size_t>& tensor_counts);

 private:
  std::vector<char> scratch_;             // the partner's copy of the kept half
  std::vector<double> sums_, peer_sums_;  // a.b, |left|^2, |right|^2 per tensor
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_HOST_ADASUM_ALLREDUCE_H_
