// The job as kolo sees it: one World per process between kolo_init and kolo_shutdown. It owns
// how the ranks found each other (the Bootstrap), the global Runtime and the process-set table;
// the C API holds one pointer to it.
//
// Each start is collective over the ranks it starts kolo on and succeeds or fails on all of them
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
#include "runtime/world/bootstrap.h"
#include "runtime/world/process_sets.h"

namespace kolo {

class World {
 public:
  // Starts kolo over `bootstrap` (collective over its ranks): connects the transports, exchanges
  // the nodes' topologies, builds the cost model from them and the tuning file, runs the
  // start-up agreements (agreements.h), starts the global Runtime and the process-set table.
  // `parsed`: the KOLO_* configuration, or why it does not parse (this rank then fails the start
  // and the others with it). `on_external_stop` runs when the launcher's library is shut down
  // before kolo_shutdown.
  static StatusOr<std::shared_ptr<World>> Start(std::unique_ptr<Bootstrap> bootstrap,
                                                const StatusOr<Config>& parsed,
                                                void (*on_external_stop)());
  ~World();  // Stop()
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  // Stops every process set's runtime and the global one (kolo_shutdown). Idempotent.
  void Stop();

  const std::shared_ptr<Runtime>& global() const { return global_; }
  ProcessSets& process_sets() { return *sets_; }

 private:
  World() = default;

  std::unique_ptr<Bootstrap> bootstrap_;
  std::shared_ptr<Runtime> global_;
  std::unique_ptr<ProcessSets> sets_;
};

// The start-up over MPI (mpi_bootstrap.h): every rank of MPI_COMM_WORLD (kolo_init), the listed
// ones (kolo_init_ranks), or the application's communicator (kolo_init_comm). MPI_Init_thread
// when the application has not started MPI; `on_mpi_finalize` runs when the application
// finalises MPI before stopping kolo. `start_timeout_seconds`: how long the ranks wait for each
// other at the start; < 0 means KOLO_START_TIMEOUT's.
StatusOr<std::shared_ptr<World>> StartWorld(void (*on_mpi_finalize)(),
                                            double start_timeout_seconds = -1);
StatusOr<std::shared_ptr<World>> StartWorldOnRanks(const std::vector<int>& ranks,
                                                   void (*on_mpi_finalize)(),
                                                   double start_timeout_seconds = -1);
StatusOr<std::shared_ptr<World>> StartWorldOnComm(MPI_Comm comm, void (*on_mpi_finalize)());
// The same on the communicator of a Fortran handle (kolo_init_comm_fortran), converted by the
// MPI plugin (mpi_plugin.h), which a start without MPI refuses before opening.
StatusOr<std::shared_ptr<World>> StartWorldOnFortranComm(int fortran_comm,
                                                         void (*on_mpi_finalize)());

}  // namespace kolo

#endif  // KOLO_RUNTIME_WORLD_WORLD_H_
