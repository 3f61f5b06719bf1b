// The engine both tree all-reduces share: the message is cut into pieces, each assigned to one
// tree; every piece is reduced up its tree to the root, then broadcast back down the same tree.
// Pieces go in one order on every rank. While piece i is reduced, the receives of piece i+1
// are already posted (Communicator::Start), so the transfer of the next segment overlaps the
// reduction of this one; sends are non-blocking with a bounded window.
//
// Why this cannot deadlock: a rank only ever blocks on (a) a receive of piece i from a child
// (reduce) or the parent (broadcast), which that peer posts after finishing piece i's own
// receives, so waits are well-founded on (phase, piece, height); (b) the oldest send of its
// window, whose receiver posts the matching receive when it reaches that piece, having needed
// only earlier pieces, all of whose sends this rank has already started.
//
// Buffers: reduced pieces live in `recv` (the send buffer is copied piece by piece first when
// out of place and only read); children's pieces land in two slots of scratch (this piece and
// the next one), kept in the instance and grown only. Reduction order per element: own value,
// then children in tree order, so it is fixed by the tree; the broadcast makes every rank's
// result the root's bits.
#ifndef KOLO_COLLECTIVES_HOST_TREE_PIPELINE_H_
#define KOLO_COLLECTIVES_HOST_TREE_PIPELINE_H_

#include <cstddef>
#include <vector>

#include "collectives/algorithm.h"
#include "collectives/host/tree_shapes.h"

namespace kolo {

struct TreePiece {
  size_t offset = 0;  // elements
  size_t count = 0;   // elements, > 0
  int tree = 0;       // index into the trees of TreePipeline::Run
};

// Appends the pieces of elements [offset, offset + count) cut into segments of at most
// `segment_elems` elements, all on `tree`.
void AppendSegments(size_t offset, size_t count, size_t segment_elems, int tree,
                    std::vector<TreePiece>* pieces);

class TreePipeline {
 public:
  // Reduce then broadcast every piece over trees[piece.tree] (this rank's node of each tree).
  // Tags used: tag_base + tree (reduce) and tag_base + 2 + tree (broadcast), trees <= 2.
  Status Run(Communicator& comm, const AllreduceArgs& args, const std::vector<TreeNode>& trees,
             const std::vector<TreePiece>& pieces, int tag_base, const char* name);

 private:
  std::vector<char> scratch_;
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_HOST_TREE_PIPELINE_H_
