// How the ranks of a job find each other: the one part of start-up that depends on how the job
// was launched. A Bootstrap makes the communicators a Runtime runs over, exchanges bytes among
// the job's ranks out of band (the start-up agreements and the topology exchange use nothing
// else), and makes the communicators of each process set. world.h starts kolo over any
// Bootstrap; mpi_bootstrap.h is the one over MPI (mpirun, srun, an application's communicator).
//
// Threading: only the application's threads call a Bootstrap (kolo_init, the process-set calls,
// kolo_shutdown), one at a time; kolo's background threads never do.
#ifndef KOLO_RUNTIME_WORLD_BOOTSTRAP_H_
#define KOLO_RUNTIME_WORLD_BOOTSTRAP_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "collectives/communicator.h"
#include "collectives/node_context.h"
#include "runtime/config.h"
#include "runtime/runtime.h"

namespace kolo {

// What one Runtime runs over.
struct Transports {
  RankLayout layout;
  std::unique_ptr<Communicator> control;  // the negotiation (runtime/negotiation/controller.h)
  std::unique_ptr<Communicator> data;     // the collectives, with its node structure set
  NodeMap nodes;                          // which node each rank is on
};

// Rank `rank`'s layout under `nodes`, as MPI computes it: local = the ranks of its node, cross =
// the ranks with its local rank (rank_layout.cc).
RankLayout LayoutFromNodes(int rank, const NodeMap& nodes);

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;

  // "mpi": for logs and errors.
  virtual std::string_view Name() const = 0;

  // Collective over the job: the global Runtime's transports. Before any other call.
  // `config` gives the node grouping (KOLO_NODE_GROUPING) and the largest single library call
  // (KOLO_FUSION_CHUNK_BYTES).
  virtual StatusOr<Transports> Connect(const Config& config) = 0;

  // The job's size (after Connect).
  virtual int Size() const = 0;

  // Collective over the job, after Connect: every rank's `mine`, in rank order, into *all. Over a
  // channel of its own, never the Transports' communicators, which belong to the runtimes.
  virtual Status AllgatherBytes(const std::string& mine, std::vector<std::string>* all) = 0;

  // Collective over the job, after Connect: on the members of `ranks` (ascending job ranks),
  // the transports of a process set over them (rank, size, local and cross computed inside the
  // set; nodes are the members' hosts); on every other rank, a Transports without communicators.
  virtual StatusOr<Transports> ConnectSubset(const std::vector<int>& ranks,
                                             const Config& config) = 0;

  // Runs `hook` when the launcher's library is shut down under kolo (MPI_Finalize before
  // kolo_shutdown), so the background thread stops first. Once per process.
  virtual Status CallBeforeExternalStop(void (*hook)()) = 0;
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_WORLD_BOOTSTRAP_H_
