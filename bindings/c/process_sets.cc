#include "bindings/c/process_sets.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "base/logging.h"
#include "collectives/mpi/mpi_call.h"
#include "kolo/kolo.h"
#include "runtime/coordinator.h"
#include "collectives/mpi/mpi_node.h"
#include "runtime/mpi_world.h"

namespace kolo::capi {
namespace {

struct ProcessSet {
  std::vector<int> ranks;            // ascending world ranks
  std::shared_ptr<Runtime> runtime;  // nullptr where this rank is not a member
};

// g_mu guards the table; the collective calls (add/remove) hold g_admin_mu throughout, so two
// threads of one rank cannot interleave their set-up collectives.
std::mutex g_mu;
std::mutex g_admin_mu;
std::unique_ptr<MpiCommunicator> g_admin;
Config g_config;
CostModel g_cost;  // the job's, from kolo_init
std::shared_ptr<Runtime> g_global;
std::map<int, ProcessSet> g_sets;
int g_next_id = 1;

std::string List(const std::vector<int>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? "," : "") + std::to_string(ranks[i]);
  return s + "]";
}

// Every rank's list (an empty one where the rank's own list was invalid), or a transport error.
Status GatherLists(const std::vector<int>& mine, bool valid, std::vector<std::vector<int>>* all) {
  const int size = g_admin->Size();
  int n = valid ? static_cast<int>(mine.size()) : -1;
  std::vector<int> counts(size);
  KOLO_MPI_CALL(MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, g_admin->comm()));
  std::vector<int> recv_counts(size), displs(size);
  int total = 0;
  for (int r = 0; r < size; ++r) {
    recv_counts[r] = std::max(counts[r], 0);
    displs[r] = total;
    total += recv_counts[r];
  }
  std::vector<int> flat(std::max(total, 1));
  KOLO_MPI_CALL(MPI_Allgatherv(mine.data(), valid ? n : 0, MPI_INT, flat.data(),
                               recv_counts.data(), displs.data(), MPI_INT, g_admin->comm()));
  all->assign(size, {});
  for (int r = 0; r < size; ++r) {
    if (counts[r] < 0) continue;
    (*all)[r].assign(flat.begin() + displs[r], flat.begin() + displs[r] + counts[r]);
  }
  for (int r = 0; r < size; ++r) {
    if (counts[r] < 0) (*all)[r] = {-1};  // marks "invalid on that rank"
  }
  return Status::OK();
}

// "" when every rank passed the same list; else "ranks 0,1 passed [0,1], rank 2 passed [0,2]".
std::string Disagreement(const std::vector<std::vector<int>>& all) {
  std::vector<std::vector<int>> lists;
  std::vector<std::vector<int>> groups;
  for (size_t r = 0; r < all.size(); ++r) {
    size_t g = std::find(lists.begin(), lists.end(), all[r]) - lists.begin();
    if (g == lists.size()) {
      lists.push_back(all[r]);
      groups.emplace_back();
    }
    groups[g].push_back(static_cast<int>(r));
  }
  if (groups.size() == 1) return "";
  std::string msg;
  for (size_t g = 0; g < groups.size(); ++g) {
    const bool one = groups[g].size() == 1;
    msg += (g ? ", " : "") + std::string(one ? "rank " : "ranks ") + RankList(groups[g]) +
           (one ? " passed " : " passed ") +
           (lists[g] == std::vector<int>{-1} ? std::string("an invalid list") : List(lists[g]));
  }
  return msg;
}

}  // namespace

void AttachProcessSets(std::unique_ptr<MpiCommunicator> admin, const Config& config,
                       std::shared_ptr<Runtime> global, const CostModel& cost) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_admin = std::move(admin);
  g_config = config;
  g_cost = cost;
  g_global = std::move(global);
  g_sets.clear();
  g_next_id = 1;
}

void DetachProcessSets() {
  std::lock_guard<std::mutex> admin_lock(g_admin_mu);
  std::map<int, ProcessSet> sets;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    sets.swap(g_sets);
    g_global.reset();
  }
  for (auto& [id, set] : sets) {
    if (set.runtime) set.runtime->Shutdown();
  }
  std::lock_guard<std::mutex> lock(g_mu);
  g_admin.reset();
}

std::shared_ptr<Runtime> ProcessSetRuntime(int id, const std::string& what, Status* why) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_global) {
    *why = FailedPreconditionError(what + ": kolo is not initialized");
    return nullptr;
  }
  if (id == 0) return g_global;
  auto it = g_sets.find(id);
  if (it == g_sets.end()) {
    *why = InvalidArgumentError(what + ": no process set " + std::to_string(id) +
                                " (never added, or removed)");
    return nullptr;
  }
  if (!it->second.runtime) {
    *why = InvalidArgumentError(what + ": rank " + std::to_string(g_global->layout().rank) +
                                " is not in process set " + std::to_string(id) + " " +
                                List(it->second.ranks));
    return nullptr;
  }
  return it->second.runtime;
}

StatusOr<int> AddProcessSet(const std::vector<int>& requested) {
  std::lock_guard<std::mutex> admin_lock(g_admin_mu);
  std::shared_ptr<Runtime> global;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    global = g_global;
  }
  if (!global || !g_admin) return FailedPreconditionError("add_process_set: kolo is not initialized");
  const int size = g_admin->Size();
  std::vector<int> ranks = requested;
  std::sort(ranks.begin(), ranks.end());
  Status local;
  if (ranks.empty()) {
    local = InvalidArgumentError("add_process_set: the list of ranks is empty");
  } else if (ranks.front() < 0 || ranks.back() >= size) {
    local = InvalidArgumentError("add_process_set: ranks " + List(requested) +
                                 " include one outside [0, " + std::to_string(size) + ")");
  } else if (std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end()) {
    local = InvalidArgumentError("add_process_set: ranks " + List(requested) +
                                 " name a rank twice");
  }
  // Collective from here on: every rank learns every rank's list, so all fail or all succeed.
  std::vector<std::vector<int>> all;
  KOLO_RETURN_IF_ERROR(GatherLists(ranks, local.ok(), &all).AddContext("add_process_set"));
  if (!local.ok()) return local;
  const std::string differ = Disagreement(all);
  if (!differ.empty()) {
    return InvalidArgumentError("add_process_set: every rank must pass the same ranks: " + differ);
  }
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (const auto& [id, set] : g_sets) {
      if (set.ranks == ranks) {
        return InvalidArgumentError("add_process_set: process set " + std::to_string(id) +
                                    " already has ranks " + List(ranks));
      }
    }
  }
  auto world = AttachProcessSet(*g_admin, ranks, static_cast<size_t>(g_config.fusion_chunk_bytes));
  if (!world.ok()) return Status(world.status()).AddContext("add_process_set " + List(ranks));
  ProcessSet set;
  set.ranks = ranks;
  if (world->control) {
    // The timeline and the autotune log are one file each, the global runtime's (its rank 0
    // writes them): a set's first member opening them again would truncate them under that
    // writer, possibly from another process. A set still tunes itself, without a log.
    Config config = g_config;
    config.timeline_path.clear();
    config.autotune_log.clear();
    // Nodes of a set are its members' hosts: KOLO_NODE_GROUPING describes the whole job.
    config.node_grouping.clear();
    auto node = MakeMpiNodeContext(world->data->comm(), "",
                                   static_cast<size_t>(g_config.fusion_chunk_bytes),
                                   world->data->liveness_check());
    if (!node.ok()) return Status(node.status()).AddContext("add_process_set " + List(ranks));
    world->data->set_node(*node);
    set.runtime = std::make_shared<Runtime>(config, world->layout, std::move(world->control),
                                            std::move(world->data));
    set.runtime->SetCostModel(g_cost);
    Status started = set.runtime->Start();
    if (!started.ok()) return started.AddContext("add_process_set " + List(ranks));
  }
  std::lock_guard<std::mutex> lock(g_mu);
  const int id = g_next_id++;
  g_sets.emplace(id, std::move(set));
  KOLO_LOG_DEBUG("process_set", "process set {} = {}", id, List(ranks));
  return id;
}

Status RemoveProcessSet(int id) {
  std::lock_guard<std::mutex> admin_lock(g_admin_mu);
  if (!g_admin) return FailedPreconditionError("remove_process_set: kolo is not initialized");
  // Every rank must remove the same set: agree first, so a mistake fails everywhere.
  int ids[2] = {id, -id}, agreed[2] = {0, 0};
  KOLO_MPI_CALL(MPI_Allreduce(ids, agreed, 2, MPI_INT, MPI_MAX, g_admin->comm()));
  if (agreed[0] != id || -agreed[1] != id) {
    return InvalidArgumentError("remove_process_set: every rank must remove the same process "
                                "set; ids range from " + std::to_string(-agreed[1]) + " to " +
                                std::to_string(agreed[0]));
  }
  if (id == 0) return InvalidArgumentError("remove_process_set: the global process set (0) "
                                           "cannot be removed");
  ProcessSet set;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_sets.find(id);
    if (it == g_sets.end()) {
      return InvalidArgumentError("remove_process_set: no process set " + std::to_string(id));
    }
    set = std::move(it->second);
    g_sets.erase(it);
  }
  if (set.runtime) set.runtime->Shutdown();
  return Status::OK();
}

StatusOr<std::vector<int>> ProcessSetRanks(int id) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_global) return FailedPreconditionError("process set: kolo is not initialized");
  if (id == 0) {
    std::vector<int> all(g_global->layout().size);
    for (size_t r = 0; r < all.size(); ++r) all[r] = static_cast<int>(r);
    return all;
  }
  auto it = g_sets.find(id);
  if (it == g_sets.end()) return InvalidArgumentError("no process set " + std::to_string(id));
  return it->second.ranks;
}

}  // namespace kolo::capi
