// NCCL communicators and kolo's streams, made on first use: streams kept for the process,
// communicators until their runtime shuts down (ForgetNcclComms) or a failure aborts them.
//  - one NCCL communicator per (kolo Communicator, by its serial; CUDA device): the global,
//    local and cross communicators of a process set are distinct Communicator objects, so each
//    level has its own. Its ncclUniqueId is made by rank 0 and broadcast over the kolo
//    Communicator itself (MPI underneath), so it works for every process set without a second
//    bootstrap.
//  - one non-blocking stream per device, kolo's own, so its work never queues behind the
//    framework's (ordering with the framework is by events, set up by the caller).
// Waiting for NCCL polls: the stream's event, NCCL's asynchronous error, and the
// Communicator's liveness check (a dead peer); on any failure the NCCL communicator is aborted
// (ncclCommAbort) and forgotten, so survivors get an error instead of a hang, and the next use
// makes a fresh one.
//
// Two threads touch NCCL communicators: the background thread, which makes them and enqueues
// on them, and the runtime's finaliser (runtime/device/device_finaliser.h), which polls their
// asynchronous errors and aborts them on a failure while the background thread goes on. So
// that an abort never frees a communicator under an enqueue, enqueues hold an NcclLease (that
// communicator's lock, which Abort also takes), and the finaliser names a communicator by an
// NcclWatch (its key and generation) rather than by its pointer: one aborted and made afresh
// meanwhile is then told apart from the one the work ran on.
#ifndef KOLO_COLLECTIVES_NCCL_NCCL_COMM_H_
#define KOLO_COLLECTIVES_NCCL_NCCL_COMM_H_

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <utility>

#include "base/status.h"
#include "collectives/communicator.h"

namespace kolo {

// kolo's stream on `device` (created on first use).
StatusOr<cudaStream_t> KoloStream(int device);

// The NCCL communicator of `comm`'s ranks on `device`; collective over `comm` the first time
// (every rank must ask, in the same order, as for any collective).
StatusOr<ncclComm_t> NcclCommFor(Communicator& comm, int device);

// (comm, device)'s NCCL communicator held for enqueuing on: no other thread's abort can free it
// while the lease lives. Let it go before waiting for the stream (WaitForNccl may abort).
class NcclLease {
 public:
  ncclComm_t get() const { return comm_; }
  NcclLease(NcclLease&&) = default;
  // Assigning over a live lease would drop its mutex before its lock.
  NcclLease& operator=(NcclLease&&) = delete;

 private:
  friend StatusOr<NcclLease> LeaseNcclComm(Communicator& comm, int device);
  NcclLease(std::shared_ptr<std::mutex> mutex, std::unique_lock<std::mutex> lock, ncclComm_t comm)
      : mutex_(std::move(mutex)), lock_(std::move(lock)), comm_(comm) {}
  std::shared_ptr<std::mutex> mutex_;  // the communicator's enqueue lock, kept alive
  std::unique_lock<std::mutex> lock_;  // declared after mutex_: released before it
  ncclComm_t comm_ = nullptr;
};
// NcclCommFor, then the lease; kUnavailable when the communicator was aborted in between.
StatusOr<NcclLease> LeaseNcclComm(Communicator& comm, int device);

// Which NCCL communicator some enqueued work runs on, for watching it from another thread.
struct NcclWatch {
  uint64_t comm = 0;  // the kolo Communicator's serial()
  int device = -1;
  uint64_t generation = 0;  // 0: (comm, device) had no NCCL communicator
};
// The current NCCL communicator of (comm, device) (generation 0 when there is none; not made).
NcclWatch WatchNccl(Communicator& comm, int device);
// OK while the watched communicator is healthy (or there is none); NCCL's asynchronous error;
// kUnavailable when it was aborted since the watch was taken (the work on it was lost).
// Thread-safe; never blocks on the GPU.
Status CheckNccl(const NcclWatch& watch);
// Aborts and forgets the watched communicator, unless it was already (a fresh one made since
// is left alone). Thread-safe.
void AbortNccl(const NcclWatch& watch);

// Blocks (polling, yielding the core) until the work enqueued so far on `stream` finishes;
// fails with NCCL's asynchronous error or comm.CheckLiveness()'s, after aborting the NCCL
// communicator of (comm, device). `what` names the operation for the message.
Status WaitForNccl(Communicator& comm, int device, cudaStream_t stream, const char* what);
// The same over the NCCL communicators of several kolo Communicators that enqueued on `stream`
// (the local and cross ones of the hierarchical all-reduce).
Status WaitForNccl(std::initializer_list<Communicator*> comms, int device, cudaStream_t stream,
                   const char* what);

// Aborts and forgets every NCCL communicator made for `comm`: the runtime calls it for its
// communicators when it shuts down (kolo_shutdown, a process set's removal), once its device
// work has drained.
void ForgetNcclComms(const Communicator& comm);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_NCCL_NCCL_COMM_H_
