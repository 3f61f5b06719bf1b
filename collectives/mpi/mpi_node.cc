#include "collectives/mpi/mpi_node.h"

#include <vector>

#include "collectives/agree.h"
#include "collectives/mpi/mpi_call.h"
#include "collectives/mpi/mpi_communicator.h"

namespace kolo {
namespace {


}  // namespace

Status GatherStrings(MPI_Comm comm, const std::string& mine, std::vector<std::string>* all) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(size), offsets(size);
  KOLO_MPI_CALL(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm));
  int total = 0;
  for (int r = 0; r < size; ++r) {
    offsets[r] = total;
    total += lens[r];
  }
  std::string joined(static_cast<size_t>(total), '\0');
  KOLO_MPI_CALL(MPI_Allgatherv(mine.data(), len, MPI_CHAR, joined.data(), lens.data(),
                               offsets.data(), MPI_CHAR, comm));
  all->clear();
  for (int r = 0; r < size; ++r) all->push_back(joined.substr(offsets[r], lens[r]));
  return Status::OK();
}

StatusOr<std::shared_ptr<NodeContext>> MakeMpiNodeContext(MPI_Comm comm,
                                                          const std::string& grouping,
                                                          size_t max_call_bytes,
                                                          std::function<Status()> liveness) {
  const GatherAll gather_all = [comm](const std::string& mine, std::vector<std::string>* all) {
    return GatherStrings(comm, mine, all);
  };
  KOLO_RETURN_IF_ERROR(AgreeOnString(gather_all, "KOLO_NODE_GROUPING", grouping));
  int rank = 0, size = 0;
  KOLO_MPI_CALL(MPI_Comm_rank(comm, &rank));
  KOLO_MPI_CALL(MPI_Comm_size(comm, &size));

  // Host of every rank: the lowest rank on it.
  MPI_Comm host;
  KOLO_MPI_CALL(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host));
  int host_id = 0;
  const int rc = MPI_Allreduce(&rank, &host_id, 1, MPI_INT, MPI_MIN, host);
  MPI_Comm_free(&host);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Allreduce(host id)");
  std::vector<int> host_of(size);
  KOLO_MPI_CALL(MPI_Allgather(&host_id, 1, MPI_INT, host_of.data(), 1, MPI_INT, comm));

  auto ctx = std::make_shared<NodeContext>();
  if (grouping.empty()) {
    ctx->map = NodeMap::FromNodeIds(host_of);
  } else {
    // Same string everywhere (checked above), so it parses or fails the same everywhere.
    auto parsed = NodeMap::Parse(grouping, size);
    if (!parsed.ok()) return parsed.status();
    ctx->map = *parsed;
  }
  const int node = ctx->map.node_of_rank[rank];
  const int local_rank = ctx->map.local_rank_of[rank];
  bool node_on_one_host = true;
  for (int r = 0; r < size; ++r) {
    if (ctx->map.node_of_rank[r] == node && host_of[r] != host_of[rank]) node_on_one_host = false;
  }

  MPI_Comm local, cross;
  KOLO_MPI_CALL(MPI_Comm_split(comm, node, local_rank, &local));
  KOLO_MPI_CALL(MPI_Comm_split(comm, local_rank, node, &cross));
  auto local_comm = std::make_unique<MpiCommunicator>(local, max_call_bytes);
  auto cross_comm = std::make_unique<MpiCommunicator>(cross, max_call_bytes);
  local_comm->set_liveness_check(liveness);
  cross_comm->set_liveness_check(liveness);
  ctx->cross = std::move(cross_comm);

  // Probe shared memory once, so the selector knows before it picks. Every rank of a node
  // takes the same branch: node_on_one_host is a fact of the whole node... except when the
  // grouping splits differently from hosts, so the decision is agreed inside the node.
  int can = node_on_one_host ? 1 : 0, all_can = 0;
  KOLO_MPI_CALL(MPI_Allreduce(&can, &all_can, 1, MPI_INT, MPI_MIN, local));
  if (!all_can) {
    ctx->shm_reason = "node " + std::to_string(node) + " of KOLO_NODE_GROUPING='" + grouping +
                      "' spans more than one host";
  } else {
    auto probe = local_comm->AllocateShared(64);
    if (probe.ok()) {
      ctx->shm_capable = true;
    } else {
      ctx->shm_reason = probe.status().message();
    }
  }
  ctx->local = std::move(local_comm);
  return ctx;
}

}  // namespace kolo
