// Attaching kolo to MPI: initialises MPI when the application has not (MPI_Init_thread with
// MPI_THREAD_MULTIPLE and Open MPI's TCP transport without its put protocol,
// collectives/mpi/tcp_defaults.h; kolo then finalises it at process exit, since MPI cannot be
// initialised twice and kolo_init must work again after kolo_shutdown), or checks the thread
// level of the application's MPI; then duplicates the base communicator (MPI_COMM_WORLD, or the
// application's choice: kolo_init_ranks, kolo_init_comm) for kolo's own control and data
// traffic and computes the rank layout (local = MPI_COMM_TYPE_SHARED, cross = ranks with the
// same local rank).
#ifndef KOLO_RUNTIME_WORLD_MPI_WORLD_H_
#define KOLO_RUNTIME_WORLD_MPI_WORLD_H_

#include <memory>

#include "collectives/mpi/mpi_communicator.h"
#include "runtime/runtime.h"

namespace kolo {

struct MpiWorld {
  RankLayout layout;
  std::unique_ptr<MpiCommunicator> control;
  std::unique_ptr<MpiCommunicator> data;
  // AttachToMpi only: a third dup of the base communicator for the collective set-up calls made
  // from the application's threads (process sets), never touched by a background thread.
  std::unique_ptr<MpiCommunicator> admin;
};

// Initialises MPI when the application has not, or checks the thread level of its MPI. First
// waits at most `start_timeout_seconds` (0: no limit) for the ranks that start together
// (runtime/world/start_fence.h), failing with kDeadlineExceeded naming those that did not arrive:
// every rank of the job when MPI is still to be initialised (MPI_Init waits for all of them),
// else `world_ranks` (MPI_COMM_WORLD ranks, ascending; empty = all), the ranks the collective
// start-up that follows waits for.
Status EnsureMpi(double start_timeout_seconds, const std::vector<int>& world_ranks = {});

// A new communicator over the MPI_COMM_WORLD ranks `ranks`, in the order given (its rank i is
// world rank ranks[i]), as Horovod's horovod_init(ranks, nranks). Collective over the listed
// ranks only (MPI_Comm_create_group), so the ranks left out never take part. kInvalidArgument,
// without any MPI call, for an empty list, a rank outside MPI_COMM_WORLD or listed twice, and
// on a rank that is not listed. The caller frees the communicator. After EnsureMpi.
StatusOr<MPI_Comm> CommOfWorldRanks(const std::vector<int>& ranks);

// Collective over `base`, which kolo duplicates (the caller keeps and frees its own). After
// EnsureMpi.
StatusOr<MpiWorld> AttachToMpi(MPI_Comm base, size_t max_call_bytes);

// Collective over `admin`: the ranks listed in `ranks` (ascending, world ranks) get a world of
// their own — rank, size, local and cross computed inside the set; every other rank gets an
// empty MpiWorld (no communicators).
StatusOr<MpiWorld> AttachProcessSet(MpiCommunicator& admin, const std::vector<int>& ranks,
                                    size_t max_call_bytes);

// Runs `hook` at the start of MPI_Finalize (an MPI_COMM_SELF attribute deleter), so a program
// that finalises MPI without kolo_shutdown stops the background thread first. Once per process.
Status CallBeforeMpiFinalize(void (*hook)());

}  // namespace kolo

#endif  // KOLO_RUNTIME_WORLD_MPI_WORLD_H_
