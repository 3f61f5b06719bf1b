// Ring all-reduce: reduce-scatter then all-gather around the ring r -> r+1 (Patarasuk & Yuan,
// "Bandwidth optimal all-reduce algorithms for clusters of workstations", JPDC 2009; the same
// schedule as Gloo's and Baidu's ring).
//
// The n elements are cut into p chunks C_0..C_{p-1} (near-equal, BlockCount). Rank r sends to
// r+1 and receives from r-1 at every step, all indices mod p:
//
//     phase            step s        rank r sends   rank r receives   and then
//     reduce-scatter   0 .. p-2      C_{r-s}        C_{r-s-1}         C_{r-s-1} = C_{r-s-1} op recv
//     all-gather       0 .. p-2      C_{r+1-s}      C_{r-s}           stores it
//
// After the reduce-scatter rank r holds the finished C_{r+1}: chunk c is reduced along the
// chain c, c+1, ..., c-1 (each rank: its own data op what arrived), once, and the all-gather
// only copies it, so every rank ends with the same bits.
//
// Pipelining: each chunk is cut into K segments of at most segment_bytes() bytes, and every
// step runs segment by segment. Segment k+1's receive and send are started (Communicator::
// Start) before segment k is reduced, so the reduction overlaps the wire; received data lands
// in one of two segment-sized scratch slots. (The next step's first segment depends on this
// step's first one, so with K = 1 there is nothing to overlap and the steps run one by one.)
//
// Bytes sent per rank: 2 (p-1)/p n. Messages: 2 (p-1) K. Cost (alpha-beta-gamma, n in bytes):
//     T = 2 (p-1) K alpha + 2 (p-1)/p n beta + (p-1)/p n gamma
// which is Patarasuk & Yuan's 2(p-1) alpha + 2(p-1)/p n beta (+ the reduction) for K = 1.
#ifndef KOLO_COLLECTIVES_HOST_RING_ALLREDUCE_H_
#define KOLO_COLLECTIVES_HOST_RING_ALLREDUCE_H_

#include <vector>

#include "collectives/algorithm.h"

namespace kolo {

class RingAllreduce : public AllreduceAlgorithm {
 public:
  static constexpr size_t kDefaultSegmentBytes = size_t{256} << 10;

  std::string_view Name() const override { return "ring"; }
  Status Supports(const SelectionInput& in) const override;
  double EstimateMicros(const SelectionInput& in) const override;
  Status Run(Communicator& comm, const AllreduceArgs& args) override;

  size_t segment_bytes() const { return segment_bytes_; }
  // Test-only: small segments force the many-segment paths on small buffers (as Gloo's
  // maxSegmentSize). Every rank must use the same value. A segment holds at least one element.
  void set_segment_bytes_for_testing(size_t bytes) { segment_bytes_ = bytes; }

 protected:
  // float32/float64: the last reduce-scatter step multiplies each finished chunk (one pass it
  // makes anyway), so the all-gather hands out scaled values and Average costs no pass of its
  // own.
  bool ScalesInItsOwnPass() const override { return true; }
  Status RunWithPostscale(Communicator& comm, const AllreduceArgs& args, double postscale) override;

 private:
  size_t segment_bytes_ = kDefaultSegmentBytes;
  std::vector<char> scratch_;  // two receive slots of one segment each
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_HOST_RING_ALLREDUCE_H_
