// Rabenseifner's all-reduce: a reduce-scatter by recursive halving, then an all-gather by
// recursive doubling (Rabenseifner, "Optimization of collective reduction operations", ICCS
// 2004; Thakur, Rabenseifner & Gropp, IJHPCA 2005, sec. 4.4). For large messages: every rank
// sends 2 (p-1)/p n bytes, like the ring, in 2 log2(p) steps instead of 2 (p-1).
//
// With p = 2^k + r the fold (collectives/host/flat_common.h) first leaves 2^k ranks, new ranks
// 0..2^k-1. The vector is cut into 2^k near-equal blocks; each rank keeps a window of blocks,
// at first all of them [0, 2^k).
//
//     reduce-scatter, d = 1, 2, ..., 2^(k-1); partner = newrank XOR d; window [lo, hi), mid:
//       lower of the two keeps [lo, mid), sends [mid, hi); the higher keeps [mid, hi), sends
//       [lo, mid); each reduces the half it keeps: kept = lower's data op higher's data
//     all-gather, d = 2^(k-1), ..., 2, 1 (the same pairs in reverse):
//       each sends its window and receives the partner's, the sibling half of the window both
//       had before the matching halving step
//
// After step d each window is n / (2d) elements; after the reduce-scatter each rank owns one
// finished block, reduced with the lower rank's data on the left at every level (a fixed order;
// each block is finished by one rank and only copied after), so all ranks end with the same
// bits. The received half lands in a scratch vector at the same offsets; whichever of the two
// buffers holds the lower rank's data takes the result, so the steps never copy.
//
// Bytes sent per rank: 2 (2^k-1)/2^k n (+ n for each folded rank, before and after).
// Cost (n in bytes, k = floor(log2 p), q = 2^k):
//     T = 2 k alpha + 2 (q-1)/q n beta + (q-1)/q n gamma
//       + (alpha + n beta + n gamma) + (alpha + n beta)             (p != q: the fold)
// For a power of two this is the paper's 2 log2(p) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma.
#ifndef KOLO_COLLECTIVES_HOST_RABENSEIFNER_ALLREDUCE_H_
#define KOLO_COLLECTIVES_HOST_RABENSEIFNER_ALLREDUCE_H_

#include <vector>

#include "collectives/algorithm.h"

namespace kolo {

class RabenseifnerAllreduce : public AllreduceAlgorithm {
 public:
  std::string_view Name() const override { return "rabenseifner"; }
  Status Supports(const SelectionInput& in) const override;
  double EstimateMicros(const SelectionInput& in) const override;
  Status Run(Communicator& comm, const AllreduceArgs& args) override;

 private:
  std::vector<char> scratch_;  // one vector, laid out like the user's
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_HOST_RABENSEIFNER_ALLREDUCE_H_
