// Ring reduce-scatter over point-to-point (Patarasuk & Yuan 2009; the first half of the ring
// all-reduce). Every rank contributes sum(counts) elements; rank r receives in `recv` the
// reduction of block r (elements [sum(counts[0..r)), +counts[r])) over all ranks. send and
// recv do not overlap; `send` is only read.
//
// Steps s = 0..p-2: rank r sends block (r - 1 - s) mod p to r + 1 and receives block
// (r - 2 - s) mod p from r - 1, reducing its own contribution into it; at step 0 the block
// sent is the rank's own input, later the partial it reduced at the step before, and the last
// step's result (block r) lands in `recv`. Each step is cut into segments of at most
// segment_bytes: a segment is forwarded as soon as it is reduced, while later segments of the
// step are still arriving, so reductions overlap transfers. Per element the order is fixed by
// the ring (partial of ranks r+1, ..., r-1, then r's own).
// Bytes per rank: sends and receives (n - n_r) where n is the input, n_r the block kept.
// Cost: (p-1) alpha + (p-1)/p n (beta + gamma) for equal blocks (segments add alpha per
// segment but overlap beta with gamma).
#ifndef KOLO_COLLECTIVES_HOST_REDUCE_SCATTER_H_
#define KOLO_COLLECTIVES_HOST_REDUCE_SCATTER_H_

#include <cstddef>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/host/pipeline_segment.h"

namespace kolo {

// `scratch` (two blocks) is grown when needed and kept by the caller across calls.
Status RingReduceScatter(Communicator& comm, const void* send, void* recv,
                         const std::vector<size_t>& counts, DataType dtype, ReduceOp op,
                         std::vector<char>* scratch, size_t segment_bytes = kPipelineSegmentBytes);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_HOST_REDUCE_SCATTER_H_
