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
// ~150 us of copying), small enough that a piece's slots stay in a core's L2/L3 share. Smaller
// pieces measured no better at 1-4 MiB (2 ranks, float32, piece 256K/512K/1M/2M: 1 MiB 161/
// 123/95/94 us, 4 MiB 732/547/469/509 us): the extra barriers cost more than the cache gains.
constexpr size_t kDefaultNodePieceBytes = size_t{2} << 20;

// The shm all-reduce's one-barrier path (ShmNodeReducer::RunSmall) serves messages up to
// these sizes: past them, every rank reading all p inputs (cache lines another core just wrote)
// costs more than the barrier it saves. A barrier costs ~0.2 us when every rank has a core and
// several us when ranks share cores (the waiter must yield to the peer it waits for), hence two
// limits. Measured on the 2-vCPU machine (docs/machine-notes.md), float32 sum, one-barrier vs
// two-barrier path, median of 7: 2 ranks 1 KiB 0.29 vs 0.35 us, 2 KiB 0.46 vs 0.44, 4 KiB 0.76
// vs 0.71, 16 KiB 2.9 vs 2.7; 4 ranks 4 KiB 4.2 vs 6.1-7.7 us, 16 KiB 8.6 vs 9.4-11, 32 KiB
// 15.3 vs 13.7-16.5, 64 KiB 28.5 vs 24-29.
constexpr size_t kShmSmallBytesOwnCore = size_t{2} << 10;
constexpr size_t kShmSmallBytesSharedCores = size_t{16} << 10;

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_HOST_NODE_PIECES_H_
