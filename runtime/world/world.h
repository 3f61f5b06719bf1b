// Starting and stopping kolo (kolo_init, kolo_init_ranks, kolo_init_comm, kolo_shutdown). Each
// start is collective over the ranks it starts kolo on and succeeds or fails on all of them
// together: a malformed or disagreeing setting, an unreadable KOLO_TIMELINE, KOLO_TUNING_FILE or
// KOLO_TOPOLOGY_XML fails every rank, naming the rank and the value; a rank that never starts
// fails the others after KOLO_START_TIMEOUT (start_fence.h).
#ifndef KOLO_RUNTIME_WORLD_WORLD_H_
#define KOLO_RUNTIME_WORLD_WORLD_H_

#include <mpi.h>

#include <memory>
#include <vector>

#include "base/status.h"
#include "runtime/runtime.h"

namespace kolo {

// kolo on every rank of MPI_COMM_WORLD; MPI_Init_thread when the application has not started
// MPI. `on_mpi_finalize` runs when the application finalises MPI before stopping kolo.
// `start_timeout_seconds`: how long the ranks wait for each other at the start; < 0 means
// KOLO_START_TIMEOUT's.
StatusOr<std::shared_ptr<Runtime>> StartWorld(void (*on_mpi_finalize)(),
                                              double start_timeout_seconds = -1);
// kolo on the listed MPI_COMM_WORLD ranks, in that order (kolo_init_ranks).
StatusOr<std::shared_ptr<Runtime>> StartWorldOnRanks(const std::vector<int>& ranks,
                                                     void (*on_mpi_finalize)(),
                                                     double start_timeout_seconds = -1);
// kolo on the application's communicator (kolo_init_comm): an intracommunicator, not
// MPI_COMM_NULL; kolo keeps dups of it, never `comm` itself.
StatusOr<std::shared_ptr<Runtime>> StartWorldOnComm(MPI_Comm comm, void (*on_mpi_finalize)());

// Stops every process set's runtime and `global` (kolo_shutdown).
void StopWorld(std::shared_ptr<Runtime> global);

// True when MPI is running with MPI_THREAD_MULTIPLE (kolo_mpi_threads_supported).
bool MpiThreadsMultiple();

}  // namespace kolo

#endif  // KOLO_RUNTIME_WORLD_WORLD_H_
