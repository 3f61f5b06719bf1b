// Recursive-doubling all-reduce, for small messages: log2(p) exchanges of the whole vector
// (Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
// MPICH", IJHPCA 2005, sec. 4.1 and 4.4 for the non-power-of-two fold).
//
// With p = 2^k + r, the fold (collectives/host/flat_common.h) first leaves 2^k ranks, new
// ranks 0..2^k-1. Then, for d = 1, 2, 4, ..., 2^(k-1):
//
//     step   partner (new rank)   rank sends    rank receives   and then
//     d      newrank XOR d        its vector    the partner's   v = v_lower op v_higher
//
// where v_lower is the vector of whichever of the two has the lower rank: both partners
// compute the same combination with the same operands in the same order, so after step d
// every group of 2d ranks holds identical bits (not "mine op theirs", which would make the two
// differ, e.g. in the NaN a min keeps, or in a float16 rounding). The fold then sends the
// result back to the ranks that sat out.
//
// Bytes sent per rank: n log2(2^k) (+ n for each folded rank, before and after).
// Cost (n in bytes, k = floor(log2 p)):
//     T = k (alpha + n beta + n gamma)                                 (p = 2^k)
//       + (alpha + n beta + n gamma) + (alpha + n beta)                (otherwise: the fold)
// For a power of two this is the paper's ceil(log2 p)(alpha + n beta + n gamma).
#ifndef KOLO_COLLECTIVES_HOST_RECURSIVE_DOUBLING_ALLREDUCE_H_
#define KOLO_COLLECTIVES_HOST_RECURSIVE_DOUBLING_ALLREDUCE_H_

#include <vector>

#include "collectives/algorithm.h"

namespace kolo {

class RecursiveDoublingAllreduce : public AllreduceAlgorithm {
 public:
  std::string_view Name() const override { return "rd"; }
  Status Supports(const SelectionInput& in) const override;
  double EstimateMicros(const SelectionInput& in) const override;
  Status Run(Communicator& comm, const AllreduceArgs& args) override;

 private:
  std::vector<char> scratch_;  // one vector: the partner's data, or the result when it is ours
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_HOST_RECURSIVE_DOUBLING_ALLREDUCE_H_
