// Every node's topology on every rank: at kolo_init the lowest rank of each node discovers its
// machine with hwloc (or loads KOLO_TOPOLOGY_XML) and the ranks exchange them as JSON, so each
// rank builds the same link model and cost model from the same facts (collectives/
// topology_cost.h) without further talk.
#ifndef KOLO_COLLECTIVES_MPI_MPI_TOPOLOGY_H_
#define KOLO_COLLECTIVES_MPI_MPI_TOPOLOGY_H_

#include <mpi.h>

#include <string>

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

// Collective over `comm`, with `map` its node structure (the same on every rank). `xml_path`
// (KOLO_TOPOLOGY_XML, may be empty) is loaded instead of discovering; `grouping_set` says the
// nodes come from KOLO_NODE_GROUPING (they count as simulated when they share one host).
// Fails on every rank together with the same message when a node cannot load `xml_path`:
// "node 1 (rank 2): hwloc XML 'x': cannot open: ...".
StatusOr<JobTopology> ExchangeTopologies(MPI_Comm comm, const NodeMap& map,
                                         const std::string& xml_path, bool grouping_set);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_MPI_MPI_TOPOLOGY_H_
