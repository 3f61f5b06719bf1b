// Double binary tree all-reduce ("dbtree"; Sanders, Speck & Traeff 2009, "Two-tree
// algorithms for full bandwidth broadcast, reduction and scan", sec. 3, as NCCL uses it for
// its tree all-reduce): two binary trees over the same ranks, built so that every rank is a
// leaf in at least one of them (tree_shapes.h: in-order trees, the second mirrored or shifted
// by one). The first half of the message is reduced up and broadcast down tree 0, the second
// half tree 1; both run in segments, interleaved (piece order: tree 0 segment 0, tree 1
// segment 0, tree 0 segment 1, ...), so a rank's interior work in one tree overlaps its leaf
// work in the other and every link carries data in both directions.
//
// Steps per segment pair (m = n / (2 s) bytes per segment), for a rank interior in tree 0:
//   reduce:    receive m from each of <= 2 children in tree 0, reduce, send m to its tree-0
//              parent; send its own m of the tree-1 half to its tree-1 parent (a leaf there);
//   broadcast: receive m from the tree-0 parent, send it to <= 2 children; receive m from
//              the tree-1 parent.
// Bytes per rank: at most 2 n sent and 2 n received over the whole all-reduce (n in each
// phase), against 2 d n at the root of a binomial tree; reductions: at most n gamma.
//
// Cost, D = depth of the deeper tree (floor(log2 p)), s segments per half: each phase is a
// pipeline of D + s - 1 stages, a stage moving <= 2 segments (2 m = n/s bytes, two messages)
// per rank and direction:
//   T(s) = 2 (D + s - 1) (2 alpha + (n/s) beta) + n gamma
// (s -> large: 2 n beta + n gamma, the full-bandwidth bound of Sanders et al., sec. 4).
// Run uses s = ceil((n/2) / segment_bytes).
#ifndef KOLO_COLLECTIVES_HOST_DBTREE_ALLREDUCE_H_
#define KOLO_COLLECTIVES_HOST_DBTREE_ALLREDUCE_H_

#include "collectives/algorithm.h"
#include "collectives/host/pipeline_segment.h"
#include "collectives/host/tree_pipeline.h"

namespace kolo {

class DoubleBinaryTreeAllreduce : public AllreduceAlgorithm {
 public:
  static constexpr size_t kDefaultSegmentBytes = kPipelineSegmentBytes;
  // segment_bytes: a test knob that forces many segments on small buffers.
  explicit DoubleBinaryTreeAllreduce(size_t segment_bytes = kDefaultSegmentBytes)
      : segment_bytes_(segment_bytes) {}

  std::string_view Name() const override { return "dbtree"; }
  Status Supports(const SelectionInput& in) const override;
  double EstimateMicros(const SelectionInput& in) const override;
  Status Run(Communicator& comm, const AllreduceArgs& args) override;

 private:
  size_t segment_bytes_;
  TreePipeline pipeline_;
  std::vector<TreePiece> pieces_, halves_[2];
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_HOST_DBTREE_ALLREDUCE_H_
