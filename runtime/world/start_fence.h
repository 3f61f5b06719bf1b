// Bounding kolo_init's start: no rank waits for ever for a rank that never calls kolo_init.
//
// MPI_Init (and every collective MPI call after it) waits for every rank of the job with no
// limit: a rank that never calls kolo_init (a script that exits early on one rank, a rank stuck
// before init) leaves the others spinning at full CPU with no message. MPI cannot help before
// it has started, but the launcher can: Open MPI's mpirun, Slurm's srun --mpi=pmix and PRRTE
// serve PMIx to every process they start. So, first thing in kolo_init, each rank posts its
// arrival under a key of its own and joins a PMIx fence over the ranks that start together,
// with a timeout (KOLO_START_TIMEOUT; Horovod's HOROVOD_START_TIMEOUT; 30 s by default, as
// horovodrun's). If the fence times out, each waiting rank asks for every rank's key, with a
// one-second timeout for all of them together (a rank that arrived has its key at its PMIx
// server already), and fails naming the ranks that did not arrive. A rank that arrives after
// the others gave up finds every key and times out alone, and says so.
//
// Without a PMIx launcher (MPICH's hydra, a singleton, kolo built without libpmix) there is no
// way to learn which ranks exist before MPI starts, and the start is not bounded.
#ifndef KOLO_RUNTIME_WORLD_START_FENCE_H_
#define KOLO_RUNTIME_WORLD_START_FENCE_H_

#include <vector>

#include "base/status.h"

namespace kolo {

class StartFence {
 public:
  StartFence() = default;
  StartFence(const StartFence&) = delete;
  StartFence& operator=(const StartFence&) = delete;
  // Releases this process's hold on PMIx. Open MPI's MPI_Init takes a hold of its own, and the
  // launcher counts a process as finished only when the last hold is released, so the fence
  // is kept until MPI_Init has returned: destroy it after MPI_Init.
  ~StartFence();

  // Waits until every rank in `ranks` (ranks of the launcher's job, ascending; empty = all of
  // them) has called this, for at most `timeout_seconds`. OK when they all did, when the
  // process was not started by a PMIx launcher, or when `ranks` leaves this rank out (the
  // caller reports that mistake itself); kDeadlineExceeded naming the missing ranks otherwise.
  // Ranks outside the job are ignored. `caller` names the call in the message ("kolo_init").
  Status Await(double timeout_seconds, const std::vector<int>& ranks, const char* caller);

 private:
  bool held_ = false;
};

// True when this build can bound the start (linked with PMIx) and the process was started by
// a PMIx launcher.
bool StartIsBounded();

}  // namespace kolo

#endif  // KOLO_RUNTIME_WORLD_START_FENCE_H_
