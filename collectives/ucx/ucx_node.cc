#include "collectives/ucx/ucx_node.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace kolo {

StatusOr<std::shared_ptr<NodeContext>> MakeUcxNodeContext(UcxCommunicator& comm,
                                                          const NodeMap& map) {
  if (map.ranks() != comm.Size()) {
    return InternalError("UCX node context: a map of " + std::to_string(map.ranks()) +
                         " ranks for a communicator of " + std::to_string(comm.Size()));
  }
  auto ctx = std::make_shared<NodeContext>();
  ctx->map = map;
  const int me = comm.Rank();
  // CreateSub is collective over every rank, so every rank makes every group, in the same
  // order, and keeps the one it belongs to.
  // Local: the ranks of each node, ascending (local rank order).
  for (int node = 0; node < map.nodes(); ++node) {
    std::vector<int> members;
    for (int r = 0; r < map.ranks(); ++r) {
      if (map.node_of_rank[r] == node) members.push_back(r);
    }
    KOLO_ASSIGN_OR_RETURN(auto sub, comm.CreateSub(members));
    if (sub) ctx->local = std::move(sub);
  }
  // Cross: the ranks with one local rank, in node order.
  for (int local = 0; local < map.max_local_size(); ++local) {
    std::vector<int> members;
    for (int node = 0; node < map.nodes(); ++node) {
      for (int r = 0; r < map.ranks(); ++r) {
        if (map.node_of_rank[r] == node && map.local_rank_of[r] == local) members.push_back(r);
      }
    }
    KOLO_ASSIGN_OR_RETURN(auto sub, comm.CreateSub(members));
    if (sub) ctx->cross = std::move(sub);
  }
  if (!ctx->local || !ctx->cross) {
    return InternalError("UCX node context: rank " + std::to_string(me) +
                         " is in no node group of " + map.Describe());
  }
  ctx->shm_capable = false;
  ctx->shm_reason = "the ucx transport has no shared-memory windows";
  return ctx;
}

}  // namespace kolo
