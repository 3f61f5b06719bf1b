// The process sets behind kolo_add_process_set (Horovod's process sets): set 0 is the global
// runtime (world.h); every other set this rank belongs to has a Runtime of its own, over
// communicators that span only its members (Bootstrap::ConnectSubset), so its negotiation
// never waits on other ranks. One table per World.
#ifndef KOLO_RUNTIME_WORLD_PROCESS_SETS_H_
#define KOLO_RUNTIME_WORLD_PROCESS_SETS_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/select/cost_model.h"
#include "runtime/config.h"
#include "runtime/runtime.h"
#include "runtime/world/bootstrap.h"

namespace kolo {

class ProcessSets {
 public:
  // `bootstrap` (kept, not owned) makes the sets' communicators; `cost` is the job's cost model
  // (a set's runtime uses it too: its links are a subset of the job's).
  ProcessSets(Bootstrap* bootstrap, const Config& config, std::shared_ptr<Runtime> global,
              const CostModel& cost);
  ProcessSets(const ProcessSets&) = delete;
  ProcessSets& operator=(const ProcessSets&) = delete;

  // kolo_shutdown: stops every set's runtime and forgets the sets and the global runtime.
  void Stop();

  // The runtime of set `id` on this rank; nullptr with *why set when the set is unknown or this
  // rank is not a member (`what` names the call for the message).
  std::shared_ptr<Runtime> RuntimeOf(int id, const std::string& what, Status* why);

  // kolo_add_process_set: collective over every rank; the new set's id (same everywhere).
  StatusOr<int> Add(const std::vector<int>& ranks);
  // kolo_remove_process_set: collective over every rank.
  Status Remove(int id);
  // The set's ranks, ascending.
  StatusOr<std::vector<int>> Ranks(int id);

 private:
  struct Set {
    std::vector<int> ranks;            // ascending ranks of the job
    std::shared_ptr<Runtime> runtime;  // nullptr where this rank is not a member
  };

  // mu_ guards the table; the collective calls (add/remove) hold calls_mu_ throughout, so two
  // threads of one rank cannot interleave their set-up collectives.
  std::mutex mu_;
  std::mutex calls_mu_;
  Bootstrap* bootstrap_;  // guarded by calls_mu_; nullptr after Stop
  const Config config_;
  const CostModel cost_;
  std::shared_ptr<Runtime> global_;
  std::map<int, Set> sets_;
  int next_id_ = 1;
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_WORLD_PROCESS_SETS_H_
