// Every node's topology on every rank: at start-up the lowest rank of each node discovers its
// machine with hwloc (or loads KOLO_TOPOLOGY_XML) and the ranks exchange them as JSON, so each
// rank builds the same link model and cost model from the same facts (collectives/
// topology_cost.h) without further talk. The exchange runs over any all-gather of bytes: the
// start-up's (runtime/world/bootstrap.h), or MPI's (collectives/mpi/mpi_topology.h).
#ifndef KOLO_COLLECTIVES_TOPOLOGY_EXCHANGE_H_
#define KOLO_COLLECTIVES_TOPOLOGY_EXCHANGE_H_

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "collectives/agree.h"
#include "collectives/node_context.h"
#include "topology/link_model.h"

namespace kolo {

struct JobTopology {
  // False when hwloc could not describe a node (then the cost model keeps its defaults);
  // `why` says which node and why.
  bool available = false;
  std::string why;
  JobLayout layout;
};

// Collective over the ranks `gather_all` spans, with `map` their node structure (the same on
// every rank) and `rank` this rank's index in it. `xml_path` (KOLO_TOPOLOGY_XML, may be empty)
// is loaded instead of discovering; `grouping_set` says the nodes come from KOLO_NODE_GROUPING
// (they count as simulated when they share one host). Fails on every rank together with the
// same message when a node cannot load `xml_path`:
// "node 1 (rank 2): hwloc XML 'x': cannot open: ...".
StatusOr<JobTopology> ExchangeTopologies(const GatherAll& gather_all, int rank,
                                         const NodeMap& map, const std::string& xml_path,
                                         bool grouping_set);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_TOPOLOGY_EXCHANGE_H_
