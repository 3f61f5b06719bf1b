// The Bootstrap over MPI (bootstrap.h): the job is an MPI communicator (MPI_COMM_WORLD, the
// listed ranks of kolo_init_ranks, or the application's, kolo_init_comm), which kolo duplicates
// for its control, data and out-of-band traffic (mpi_world.h), never using the base one itself.
#ifndef KOLO_RUNTIME_WORLD_MPI_BOOTSTRAP_H_
#define KOLO_RUNTIME_WORLD_MPI_BOOTSTRAP_H_

#include <mpi.h>

#include <memory>
#include <vector>

#include "base/status.h"
#include "runtime/world/bootstrap.h"

namespace kolo {

// kolo over every rank of MPI_COMM_WORLD; MPI_Init_thread when the application has not started
// MPI. The ranks first wait for each other for at most `start_timeout_seconds`
// (runtime/world/start_fence.h; 0: no limit).
StatusOr<std::unique_ptr<Bootstrap>> MpiBootstrapOnWorld(double start_timeout_seconds);
// kolo over the listed MPI_COMM_WORLD ranks, in that order (kolo_init_ranks).
StatusOr<std::unique_ptr<Bootstrap>> MpiBootstrapOnRanks(const std::vector<int>& ranks,
                                                         double start_timeout_seconds);
// kolo over the application's communicator (kolo_init_comm): an intracommunicator, not
// MPI_COMM_NULL.
StatusOr<std::unique_ptr<Bootstrap>> MpiBootstrapOnComm(MPI_Comm comm,
                                                        double start_timeout_seconds);

// True when MPI is running with MPI_THREAD_MULTIPLE (kolo_mpi_threads_supported).
bool MpiThreadsMultiple();

}  // namespace kolo

#endif  // KOLO_RUNTIME_WORLD_MPI_BOOTSTRAP_H_
