#include "runtime/world/process_sets.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "base/logging.h"
#include "base/rank_list.h"
#include "runtime/world/process_set_calls.h"

namespace kolo {
namespace {

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
  const std::string why = same_kind ? rule : "every rank must make the same process-set call";
  return InvalidArgumentError(what + ": " + why + ": " + differ);
}

}  // namespace

ProcessSets::ProcessSets(Bootstrap* bootstrap, const Config& config,
                         std::shared_ptr<Runtime> global, const CostModel& cost)
    : bootstrap_(bootstrap), config_(config), cost_(cost), global_(std::move(global)) {}

void ProcessSets::Stop() {
  std::lock_guard<std::mutex> calls_lock(calls_mu_);
  std::map<int, Set> sets;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sets.swap(sets_);
    global_.reset();
  }
  for (auto& [id, set] : sets) {
    if (set.runtime) set.runtime->Shutdown();
  }
  bootstrap_ = nullptr;
}

std::shared_ptr<Runtime> ProcessSets::RuntimeOf(int id, const std::string& what, Status* why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!global_) {
    *why = FailedPreconditionError(what + ": kolo is not initialized");
    return nullptr;
  }
  if (id == 0) return global_;
  auto it = sets_.find(id);
  if (it == sets_.end()) {
    *why = InvalidArgumentError(what + ": no process set " + std::to_string(id) +
                                " (never added, or removed)");
    return nullptr;
  }
  if (!it->second.runtime) {
    *why = InvalidArgumentError(what + ": rank " + std::to_string(global_->layout().rank) +
                                " is not in process set " + std::to_string(id) + " " +
                                BracketedRanks(it->second.ranks));
    return nullptr;
  }
  return it->second.runtime;
}

StatusOr<int> ProcessSets::Add(const std::vector<int>& requested) {
  std::lock_guard<std::mutex> calls_lock(calls_mu_);
  std::shared_ptr<Runtime> global;
  {
    std::lock_guard<std::mutex> lock(mu_);
    global = global_;
  }
  if (!global || !bootstrap_) {
    return FailedPreconditionError("add_process_set: kolo is not initialized");
  }
  const int size = bootstrap_->Size();
  std::vector<int> ranks = requested;
  std::sort(ranks.begin(), ranks.end());
  Status local;
  if (ranks.empty()) {
    local = InvalidArgumentError("add_process_set: the list of ranks is empty");
  } else if (ranks.front() < 0 || ranks.back() >= size) {
    local = InvalidArgumentError("add_process_set: ranks " + BracketedRanks(requested) +
                                 " include one outside [0, " + std::to_string(size) + ")");
  } else if (std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end()) {
    local = InvalidArgumentError("add_process_set: ranks " + BracketedRanks(requested) +
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
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, set] : sets_) {
      if (set.ranks == ranks) {
        return InvalidArgumentError("add_process_set: process set " + std::to_string(id) +
                                    " already has ranks " + BracketedRanks(ranks));
      }
    }
  }
  // The timeline and the autotune log are one file each, the global runtime's (its rank 0
  // writes them): a set's first member opening them again would truncate them under that
  // writer, possibly from another process. A set still tunes itself, without a log.
  Config config = config_;
  config.timeline_path.clear();
  config.autotune_log.clear();
  // Nodes of a set are its members' hosts: KOLO_NODE_GROUPING describes the whole job.
  config.node_grouping.clear();
  auto transports = bootstrap_->ConnectSubset(ranks, config);
  if (!transports.ok()) {
    return Status(transports.status()).AddContext("add_process_set " + BracketedRanks(ranks));
  }
  Set set;
  set.ranks = ranks;
  if (transports->control) {
    set.runtime = std::make_shared<Runtime>(config, transports->layout,
                                            std::move(transports->control),
                                            std::move(transports->data));
    set.runtime->SetCostModel(cost_);
    Status started = set.runtime->Start();
    if (!started.ok()) return started.AddContext("add_process_set " + BracketedRanks(ranks));
  }
  std::lock_guard<std::mutex> lock(mu_);
  const int id = next_id_++;
  sets_.emplace(id, std::move(set));
  KOLO_LOG_DEBUG("process_set", "process set {} = {}", id, BracketedRanks(ranks));
  return id;
}

Status ProcessSets::Remove(int id) {
  std::lock_guard<std::mutex> calls_lock(calls_mu_);
  std::shared_ptr<Runtime> global;
  {
    std::lock_guard<std::mutex> lock(mu_);
    global = global_;
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
  Set set;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sets_.find(id);
    if (it == sets_.end()) {
      return InvalidArgumentError("remove_process_set: no process set " + std::to_string(id));
    }
    set = std::move(it->second);
    sets_.erase(it);
  }
  if (set.runtime) set.runtime->Shutdown();
  return Status::OK();
}

StatusOr<std::vector<int>> ProcessSets::Ranks(int id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!global_) return FailedPreconditionError("process set: kolo is not initialized");
  if (id == 0) {
    std::vector<int> all(global_->layout().size);
    for (size_t r = 0; r < all.size(); ++r) all[r] = static_cast<int>(r);
    return all;
  }
  auto it = sets_.find(id);
  if (it == sets_.end()) return InvalidArgumentError("no process set " + std::to_string(id));
  return it->second.ranks;
}

}  // namespace kolo
