// The node context of an MPI communicator (collectives/node_context.h): which ranks share a
// node, the node-local and cross-node communicators, and whether the node-local one can share
// memory. Nodes are the hosts (MPI_COMM_TYPE_SHARED) unless KOLO_NODE_GROUPING says otherwise;
// a grouping whose node spans two hosts still runs the hierarchical algorithms (over MPI
// point-to-point) but not the shared-memory ones.
#ifndef KOLO_COLLECTIVES_MPI_MPI_NODE_H_
#define KOLO_COLLECTIVES_MPI_MPI_NODE_H_

#include <mpi.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/node_context.h"

namespace kolo {

// Collective over `comm`. Succeeds or fails on every rank together: a grouping that differs
// between ranks or does not parse fails all of them with a message naming it (and the ranks).
// `liveness`: the check the local and cross communicators run during long waits (see
// MpiCommunicator::set_liveness_check); may be empty.
StatusOr<std::shared_ptr<NodeContext>> MakeMpiNodeContext(
    MPI_Comm comm, const std::string& grouping, size_t max_call_bytes,
    std::function<Status()> liveness = nullptr);

// Every rank's `mine`, in rank order, on every rank. Collective.
Status GatherStrings(MPI_Comm comm, const std::string& mine, std::vector<std::string>* all);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_MPI_MPI_NODE_H_
