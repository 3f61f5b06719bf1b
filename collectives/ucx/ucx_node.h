// The node structure of a UCX communicator (collectives/node_context.h): the node-local and
// cross-node sub-communicators the hierarchical algorithms run over, made with
// UcxCommunicator::CreateSub on the same worker, so one background thread drives them all.
//
// The map comes from the start (the hosts the ranks reported, or KOLO_NODE_GROUPING), already
// the same on every rank. No shared memory: kolo's shared-memory algorithms need a window every
// rank of a node maps (MPI_Win_allocate_shared over MPI), which UCX does not provide, so the
// selector is told why and the node step runs kolo's point-to-point algorithms instead.
#ifndef KOLO_COLLECTIVES_UCX_UCX_NODE_H_
#define KOLO_COLLECTIVES_UCX_UCX_NODE_H_

#include <memory>

#include "base/status.h"
#include "collectives/node_context.h"
#include "collectives/ucx/ucx_communicator.h"

namespace kolo {

// Collective over `comm`, every rank passing the same `map` (of comm's ranks).
StatusOr<std::shared_ptr<NodeContext>> MakeUcxNodeContext(UcxCommunicator& comm,
                                                          const NodeMap& map);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_UCX_UCX_NODE_H_
