// The process sets behind kolo_add_process_set (Horovod's process sets): set 0 is the global
// runtime (world.h); every other set this rank belongs to has a Runtime of its own, over
// communicators that span only its members, so its negotiation never waits on other ranks.
#ifndef KOLO_RUNTIME_WORLD_PROCESS_SETS_H_
#define KOLO_RUNTIME_WORLD_PROCESS_SETS_H_

#include <memory>
#include <vector>

#include "collectives/mpi/mpi_communicator.h"
#include "runtime/runtime.h"

namespace kolo {

// Called by kolo_init with the world's admin communicator, the global runtime and the job's
// cost model (a set's runtime uses it too: its links are a subset of the job's).
void AttachProcessSets(std::unique_ptr<MpiCommunicator> admin, const Config& config,
                       std::shared_ptr<Runtime> global, const CostModel& cost);
// Called by kolo_shutdown: stops every set's runtime and forgets the sets.
void DetachProcessSets();

// The runtime of set `id` on this rank; nullptr with *why set when the set is unknown or this
// rank is not a member (`what` names the call for the message).
std::shared_ptr<Runtime> ProcessSetRuntime(int id, const std::string& what, Status* why);

// kolo_add_process_set: collective over every rank; the new set's id (same everywhere).
StatusOr<int> AddProcessSet(const std::vector<int>& ranks);
// kolo_remove_process_set: collective over every rank.
Status RemoveProcessSet(int id);
// The set's world ranks, ascending.
StatusOr<std::vector<int>> ProcessSetRanks(int id);

}  // namespace kolo

#endif  // KOLO_RUNTIME_WORLD_PROCESS_SETS_H_
