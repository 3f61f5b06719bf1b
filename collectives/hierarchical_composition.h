// The three-phase hierarchical all-reduce written once over a Communicator's collective
// primitives (ReduceScatter, Allreduce, Allgatherv), so the same composition runs on host
// communicators (MPI, the thread world: tested there on node groupings 2x2, 3+2, 1+3) and on
// NCCL ones over GPU memory (collectives/nccl/nccl_communicator.h: the nccl_hierarchical
// algorithm). Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE (Sergeev & Del Balso 2018):
//
//   phase | over   | local rank k < m                         | local rank k >= m
//   ------+--------+------------------------------------------+----------------------------
//   1     | local  | ReduceScatter: slice k of the node's sum  | contributes, receives nothing
//   2     | cross  | Allreduce of slice k over the nodes       | -
//   3     | local  | Allgatherv: every slice to every rank     | receives every slice
//
// m = the smallest node's rank count: n elements are cut into m slices (sizes differ by at
// most one element), owned by local ranks 0..m-1, whose cross communicators span every node
// (collectives/node_context.h), so uneven groupings need no other communicator; ranks m.. of a
// bigger node only feed phase 1. Bytes per owner across nodes: 2 (N-1)/N x n/m.
#ifndef KOLO_COLLECTIVES_HIERARCHICAL_COMPOSITION_H_
#define KOLO_COLLECTIVES_HIERARCHICAL_COMPOSITION_H_

#include <functional>

#include "collectives/algorithm.h"

namespace kolo {

// `scratch(bytes)` returns a buffer of at least `bytes` in the buffers' memory (host or
// device), for this rank's slice; valid for the call. `owners` = m, the same on every rank.
// Errors come back with the phase and the communicator's rank in the message.
Status ComposeHierarchicalAllreduce(Communicator& local, Communicator& cross, int owners,
                                    const AllreduceArgs& args,
                                    const std::function<void*(size_t)>& scratch);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_HIERARCHICAL_COMPOSITION_H_
