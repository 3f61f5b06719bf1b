// Attaching kolo to MPI: initialises MPI when the application has not (MPI_Init_thread with
// MPI_THREAD_MULTIPLE; kolo then finalises it at process exit, since MPI cannot be
// initialised twice and kolo_init must work again after kolo_shutdown), or checks the thread
// level of the application's MPI; then duplicates MPI_COMM_WORLD for kolo's own control and
// data traffic and computes the rank layout (local = MPI_COMM_TYPE_SHARED, cross = ranks with
// the same local rank).
#ifndef KOLO_RUNTIME_MPI_WORLD_H_
#define KOLO_RUNTIME_MPI_WORLD_H_

#include <memory>

#include "collectives/mpi/mpi_communicator.h"
#include "runtime/runtime.h"

namespace kolo {

struct MpiWorld {
  RankLayout layout;
  std::unique_ptr<MpiCommunicator> control;
  std::unique_ptr<MpiCommunicator> data;
};

StatusOr<MpiWorld> AttachToMpi(size_t max_call_bytes);

}  // namespace kolo

#endif  // KOLO_RUNTIME_MPI_WORLD_H_
