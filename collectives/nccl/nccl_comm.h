// NCCL communicators and kolo's streams, made on first use and kept for the process:
//  - one NCCL communicator per (kolo Communicator, CUDA device): the global, local and cross
//    communicators of a process set are distinct Communicator objects, so each level has its
//    own. Its ncclUniqueId is made by rank 0 and broadcast over the kolo Communicator itself
//    (MPI underneath), so it works for every process set without a second bootstrap.
//  - one non-blocking stream per device, kolo's own, so its work never queues behind the
//    framework's (ordering with the framework is by events, set up by the caller).
// Waiting for NCCL polls: the stream's event, NCCL's asynchronous error, and the
// Communicator's liveness check (a dead peer); on any failure the NCCL communicator is aborted
// (ncclCommAbort) and forgotten, so survivors get an error instead of a hang, and the next use
// makes a fresh one.
#ifndef KOLO_COLLECTIVES_NCCL_NCCL_COMM_H_
#define KOLO_COLLECTIVES_NCCL_NCCL_COMM_H_

#include <cuda_runtime.h>
#include <nccl.h>

#include <initializer_list>

#include "base/status.h"
#include "collectives/communicator.h"

namespace kolo {

// kolo's stream on `device` (created on first use).
StatusOr<cudaStream_t> KoloStream(int device);

// The NCCL communicator of `comm`'s ranks on `device`; collective over `comm` the first time
// (every rank must ask, in the same order, as for any collective).
StatusOr<ncclComm_t> NcclCommFor(Communicator& comm, int device);

// Blocks (polling, yielding the core) until the work enqueued so far on `stream` finishes;
// fails with NCCL's asynchronous error or comm.CheckLiveness()'s, after aborting the NCCL
// communicator of (comm, device). `what` names the operation for the message.
Status WaitForNccl(Communicator& comm, int device, cudaStream_t stream, const char* what);
// The same over the NCCL communicators of several kolo Communicators that enqueued on `stream`
// (the local and cross ones of the hierarchical all-reduce).
Status WaitForNccl(std::initializer_list<Communicator*> comms, int device, cudaStream_t stream,
                   const char* what);

// Aborts and forgets every NCCL communicator made for `comm` (the runtime calls it when comm
// goes away or a peer is lost).
void ForgetNcclComms(const Communicator& comm);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_NCCL_NCCL_COMM_H_
