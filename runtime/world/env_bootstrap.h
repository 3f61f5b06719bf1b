// kolo started without MPI, from the variables torchrun (and Kubernetes operators, Ray Train, a
// Slurm script) give every process: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, and optionally
// LOCAL_RANK, LOCAL_WORLD_SIZE. MPI is never initialised; the ranks meet over kolo's TCP
// rendezvous (tcp_rendezvous.h: rank 0 serves on MASTER_ADDR:MASTER_PORT) and kolo's traffic
// runs over UCX (ucx_bootstrap.h), whatever KOLO_TRANSPORT says.
//
// Why kolo's own rendezvous and not torch's TCPStore: kolo's C API has no torch, and a program
// in C started by a Slurm script must start the same way; the store's protocol is torch's
// private business and changes between versions. The price: under torchrun MASTER_PORT is held
// by torchrun's own store, so kolo serves on KOLO_MASTER_PORT when set, else MASTER_PORT + 1
// under torchrun (TORCHELASTIC_RUN_ID set), else MASTER_PORT.
//
// The job's token (tcp_rendezvous.h) is KOLO_JOB_ID, else TORCHELASTIC_RUN_ID, else
// SLURM_JOB_ID, else MASTER_ADDR:MASTER_PORT/WORLD_SIZE.
//
// Nodes are the hosts the ranks report (or KOLO_NODE_GROUPING); LOCAL_RANK and LOCAL_WORLD_SIZE,
// when set, must match them on every rank, else every rank fails naming the first that differs.
#ifndef KOLO_RUNTIME_WORLD_ENV_BOOTSTRAP_H_
#define KOLO_RUNTIME_WORLD_ENV_BOOTSTRAP_H_

#include <memory>

#include "base/status.h"
#include "runtime/world/bootstrap.h"

namespace kolo {

// True when RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT are all set and no MPI launcher's
// variable is (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK): under mpirun the start stays MPI's.
bool EnvStartRequested();

// Meets the other ranks (collective over the job, bounded by `start_timeout_seconds`) and
// returns the Bootstrap over them. kInvalidArgument naming the variable when one does not parse.
StatusOr<std::unique_ptr<Bootstrap>> EnvBootstrap(double start_timeout_seconds);

}  // namespace kolo

#endif  // KOLO_RUNTIME_WORLD_ENV_BOOTSTRAP_H_
