// The Bootstrap of KOLO_TRANSPORT=ucx (bootstrap.h): the job's control and data traffic runs over
// UCX communicators (collectives/ucx/), while another Bootstrap (MPI under mpirun) keeps what
// is out of band: the job's ranks and nodes, the all-gathers of the start-up and of the UCX
// worker addresses, and the hook before the launcher's library stops.
//
// Connect lets the out-of-band Bootstrap connect as usual and keeps only its rank layout, its
// node map and its peer watch (runtime/peer_watch.h: UCX never reports a dead same-host peer,
// the watch does); its communicators are freed. Then one UCX world over the job gives the
// control communicator (the world one) and the data communicator (a sub-communicator of every
// rank: another id in the tag, so the negotiation's messages and the algorithms' never match
// each other), with the node's sub-communicators (collectives/ucx/ucx_node.h) on the data one.
//
// A process set gets a UCX world of its own (ConnectSubset): its Runtime has a background thread
// of its own, and a worker is driven by one thread.
#ifndef KOLO_RUNTIME_WORLD_UCX_BOOTSTRAP_H_
#define KOLO_RUNTIME_WORLD_UCX_BOOTSTRAP_H_

#include <memory>

#include "runtime/world/bootstrap.h"

namespace kolo {

// True when this build has the UCX transport (KOLO_WITH_UCX).
bool UcxTransportBuilt();

// kolo's traffic over UCX, `out_of_band` for everything else.
std::unique_ptr<Bootstrap> UcxBootstrapOver(std::unique_ptr<Bootstrap> out_of_band);

}  // namespace kolo

#endif  // KOLO_RUNTIME_WORLD_UCX_BOOTSTRAP_H_
