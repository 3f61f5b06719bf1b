// The segment kolo's pipelined host collectives cut a message into (the trees' pieces,
// tree_pipeline.h; the ring reduce-scatter's, reduce_scatter.h): 64 KiB less 256 bytes, so that
// a segment with its headers fits Open MPI's TCP eager limit (btl_tcp_eager_limit, 65536 bytes
// with the point-to-point header). A segment of exactly 64 KiB went by the rendezvous protocol
// instead: all but its last few bytes at once, those only after the receiver's answer, a round
// trip per segment that waits behind whatever the link's queue holds. Measured across nodes
// (4 nodes x 1 rank over 1 Gbit/s links, docs/benchmarks.md "Tree segments that fit an eager
// send"), 16 MiB: the double binary tree 282-289 ms (model 287) against 300-425, the binomial
// tree 548-549 against 580-671, the ring reduce-scatter 110-111 against 140-143. On one host
// (shared memory, single copy above 4 KiB) the two sizes measured alike.
#ifndef KOLO_COLLECTIVES_HOST_PIPELINE_SEGMENT_H_
#define KOLO_COLLECTIVES_HOST_PIPELINE_SEGMENT_H_

#include <cstddef>

namespace kolo {

constexpr size_t kPipelineSegmentBytes = (size_t{64} << 10) - 256;

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_HOST_PIPELINE_SEGMENT_H_
