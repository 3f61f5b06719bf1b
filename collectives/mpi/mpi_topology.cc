#include "collectives/mpi/mpi_topology.h"

#include <vector>

#include "collectives/mpi/mpi_call.h"
#include "collectives/mpi/mpi_node.h"

namespace kolo {

StatusOr<JobTopology> ExchangeTopologies(MPI_Comm comm, const NodeMap& map,
                                         const std::string& xml_path, bool grouping_set) {
  int rank = 0;
  KOLO_MPI_CALL(MPI_Comm_rank(comm, &rank));
  const GatherAll gather_all = [comm](const std::string& mine, std::vector<std::string>* all) {
    return GatherStrings(comm, mine, all);
  };
  return ExchangeTopologies(gather_all, rank, map, xml_path, grouping_set);
}

}  // namespace kolo
