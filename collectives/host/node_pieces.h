// Geometry shared by the node-level all-reduces (shm_allreduce, hierarchical_allreduce): a
// message is cut into pieces of at most `piece_elems` elements, and every piece into `owners`
// slices, the first count % owners of them one element longer. Every rank of a node, and every
// node of a job, derives the same pieces and slices from (count, dtype, piece bytes, owners),
// which is what keeps the cross-node calls of the hierarchical all-reduce matched.
#ifndef KOLO_COLLECTIVES_HOST_NODE_PIECES_H_
#define KOLO_COLLECTIVES_HOST_NODE_PIECES_H_

#include <algorithm>
#include <cstddef>

namespace kolo {

struct SliceRange {
  size_t offset = 0;  // elements from the start of the piece
  size_t count = 0;
};

inline SliceRange SliceOf(size_t piece_count, int owners, int k) {
  const size_t base = piece_count / owners, rem = piece_count % owners;
  const size_t uk = static_cast<size_t>(k);
  return {uk * base + std::min(uk, rem), base + (uk < rem ? 1 : 0)};
}

// The most elements any slice of a piece of `piece_elems` elements can hold.
inline size_t MaxSliceElems(size_t piece_elems, int owners) {
  return (piece_elems + owners - 1) / owners;
}

inline size_t RoundUp64(size_t bytes) { return (bytes + 63) / 64 * 64; }

// Default piece: large enough that the two barriers per piece cost little (~1 us each against
// ~150 us of copying), small enough that a piece's slots stay in a core's L2/L3 share.
constexpr size_t kDefaultNodePieceBytes = size_t{2} << 20;

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_HOST_NODE_PIECES_H_
