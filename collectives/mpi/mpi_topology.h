// The topology exchange (collectives/topology_exchange.h) over an MPI communicator, for the
// tools and tests that run on MPI_COMM_WORLD without starting kolo (kolo-topo).
#ifndef KOLO_COLLECTIVES_MPI_MPI_TOPOLOGY_H_
#define KOLO_COLLECTIVES_MPI_MPI_TOPOLOGY_H_

#include <mpi.h>

#include <string>

#include "collectives/topology_exchange.h"

namespace kolo {

// Collective over `comm`, with `map` its node structure (the same on every rank).
StatusOr<JobTopology> ExchangeTopologies(MPI_Comm comm, const NodeMap& map,
                                         const std::string& xml_path, bool grouping_set);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_MPI_MPI_TOPOLOGY_H_
