// Binomial-tree all-reduce ("tree"): a binomial reduce to rank 0 followed by a binomial
// broadcast from rank 0, both pipelined in segments (collectives/host/tree_pipeline.h).
//
// Tree (tree_shapes.h): rank r's parent is r - lowbit(r); rank 0 has children 1, 2, 4, ...
// Steps without pipelining, d = ceil(log2 p), round j = 0..d-1:
//   reduce    round j: every rank r with lowbit(r) == 2^j sends its partial (n bytes) to
//                      r - 2^j, which reduces it into its own;
//   broadcast round j: every multiple r of 2^(d-j) (those hold the result by now) sends it
//                      to r + 2^(d-1-j), when that is a rank.
// Bytes per rank: a rank with k children receives k n and sends n (reduce), receives n and
// sends k n (broadcast); rank 0 moves 2 d n, a leaf 2 n.
//
// Cost (Hockney alpha-beta-gamma; Thakur, Rabenseifner & Gropp 2005, sec. 4.2 for the
// binomial reduce and broadcast): without pipelining
//   T = 2 d (alpha + n beta) + d n gamma.
// With the message cut into s segments of n/s bytes, each phase is a pipeline of d + s - 1
// stages of one segment per tree edge (a rank's transfers with different peers overlap; the
// root's reductions do not):
//   T(s) = 2 (d + s - 1) (alpha + (n/s) beta) + d n gamma,
// which is the unpipelined formula at s = 1. Run uses s = ceil(n / segment_bytes).
#ifndef KOLO_COLLECTIVES_HOST_TREE_ALLREDUCE_H_
#define KOLO_COLLECTIVES_HOST_TREE_ALLREDUCE_H_

#include "collectives/algorithm.h"
#include "collectives/host/pipeline_segment.h"
#include "collectives/host/tree_pipeline.h"

namespace kolo {

class TreeAllreduce : public AllreduceAlgorithm {
 public:
  static constexpr size_t kDefaultSegmentBytes = kPipelineSegmentBytes;
  // segment_bytes: a test knob (Gloo's max segment size) that forces many segments on small
  // buffers; production uses the default.
  explicit TreeAllreduce(size_t segment_bytes = kDefaultSegmentBytes)
      : segment_bytes_(segment_bytes) {}

  std::string_view Name() const override { return "tree"; }
  Status Supports(const SelectionInput& in) const override;
  double EstimateMicros(const SelectionInput& in) const override;
  Status Run(Communicator& comm, const AllreduceArgs& args) override;

 private:
  size_t segment_bytes_;
  TreePipeline pipeline_;
  std::vector<TreePiece> pieces_;
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_HOST_TREE_ALLREDUCE_H_
