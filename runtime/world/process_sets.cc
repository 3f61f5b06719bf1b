#include "runtime/world/process_sets.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "base/logging.h"
#include "runtime/world/process_set_calls.h"
#include "collectives/mpi/mpi_call.h"
#include "runtime/coordinator.h"
#include "collectives/mpi/mpi_node.h"
#include "runtime/world/mpi_world.h"

namespace kolo {
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

// Every rank's call, and OK when all made the same one; else why not, the same on every rank.
// `what` is this rank's call for the message ("remove_process_set(1)").
Status Agree(Runtime& global, const ProcessSetCall& mine, const std::string& what,
             const std::string& rule) {
  auto calls = ExchangeCalls(global, mine);
  if (!calls.ok()) return Status(calls.status()).AddContext(what);
  const std::string differ = DescribeDifferences(*calls);
  if (differ.empty()) return Status::OK();
  const bool same_kind = std::all_of(calls->begin(), calls->end(), [&](const ProcessSetCall& c) {
    return c.kind == mine.kind;
  });
  return InvalidArgumentError(what + ": " +
                              (same_kind ? rule : "every rank must make the same process-set call") +
                              ": " + differ);
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
  ProcessSetCall call;
  call.valid = local.ok();
  if (call.valid) call.ranks = ranks;
  const Status agreed = Agree(*global, call, "add_process_set",
                              "every rank must pass the same ranks");
  if (!local.ok()) return local;
  KOLO_RETURN_IF_ERROR(agreed);
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
  std::shared_ptr<Runtime> global;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    global = g_global;
  }
  if (!global) return FailedPreconditionError("remove_process_set: kolo is not initialized");
  // Every rank must remove the same set: agree first, so a mistake fails everywhere.
  ProcessSetCall call;
  call.kind = ProcessSetCall::kRemove;
  call.id = id;
  KOLO_RETURN_IF_ERROR(Agree(*global, call, "remove_process_set(" + std::to_string(id) + ")",
                             "every rank must remove the same process set"));
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

}  // namespace kolo
