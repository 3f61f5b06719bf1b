// NCCL communicators and kolo's streams, made on first use and kept until their runtime shuts
// down (ForgetNcclComms, ReleaseKoloStreams) or, for a communicator, a failure aborts it.
//  - one NCCL communicator per (kolo Communicator, by its serial; CUDA device): the global,
//    local and cross communicators of a process set are distinct Communicator objects, so each
//    level has its own. Its ncclUniqueId is made by rank 0 and broadcast over the kolo
//    Communicator itself (MPI underneath), so it works for every process set without a second
//    bootstrap.
//  - one non-blocking stream per (process set, device), kolo's own, so its work never queues
//    behind the framework's (ordering with the framework is by events, set up by the caller).
//    Per process set, not per device: each set's runtime orders its own work, and two sets
//    enqueuing on one stream could put their NCCL calls in different orders on different
//    ranks, which NCCL documents as a deadlock. A set's local and cross communicators share
//    its stream (Communicator::order_serial).
//
// Non-blocking NCCL communicators (ncclConfig_t.blocking = 0), so that no NCCL call can hold a
// thread for ever: making one returns at once and is polled, and so is a call that NCCL has to
// finish later (ncclInProgress: it connects a communicator's links at its first collective,
// waiting for the peers to do the same). Both waits end when the set-up timeout passes
// (SetNcclSetupTimeout: KOLO_START_TIMEOUT) or a peer is gone (CheckLiveness), and then the
// communicator is aborted.
//
// Waiting for NCCL polls: the stream's event, NCCL's asynchronous error, and the
// Communicator's liveness check (a dead peer); on any failure the NCCL communicator is aborted
// (ncclCommAbort) so survivors get an error instead of a hang. An aborted communicator is not
// made again: the ranks would have to agree to it, and a peer may still hold its own (it saw no
// failure) and never join a new one. Every later use fails, naming the abort; a new process set
// (or a new kolo_init) makes new communicators on every rank.
//
// Two threads touch NCCL communicators: the background thread, which makes them and enqueues
// on them, and the runtime's finaliser (runtime/device/device_finaliser.h), which polls their
// asynchronous errors and aborts them on a failure while the background thread goes on. So
// that an abort never frees a communicator under an enqueue, enqueues hold an NcclLease (that
// communicator's lock, which Abort also takes; an abort first raises a flag that a lease's
// polling wait sees, so it never waits for a connection that will not come), and the finaliser
// names a communicator by an NcclWatch (its key and generation) rather than by its pointer.
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

// kolo's stream of `comm`'s process set (its order_serial) on `device`, created on first use.
StatusOr<cudaStream_t> KoloStream(const Communicator& comm, int device);
// Destroys the streams of `comm`'s process set once their work is done (CUDA frees a stream's
// resources after its last work), at the runtime's shutdown, after its last device work.
void ReleaseKoloStreams(const Communicator& comm);

// How long making an NCCL communicator, or its first connection, may take before it is aborted
// and the operation fails; <= 0: no limit (a peer that is gone still ends the wait). The
// runtime sets KOLO_START_TIMEOUT here at start; 30 s until then.
void SetNcclSetupTimeout(double seconds);

// The NCCL communicator of `comm`'s ranks on `device`; collective over `comm` the first time
// (every rank must ask, in the same order, as for any collective). kUnavailable, naming the
// abort, once one was aborted (see above); kDeadlineExceeded when set-up timed out.
StatusOr<ncclComm_t> NcclCommFor(Communicator& comm, int device);

struct NcclGuard;  // a communicator's enqueue lock and abort flag (nccl_comm.cc)

// (comm, device)'s NCCL communicator held for enqueuing on: no other thread's abort can free it
// while the lease lives. Let it go before waiting for the stream (WaitForNccl may abort).
class NcclLease {
 public:
  ncclComm_t get() const { return nc_; }
  NcclLease(NcclLease&&) = default;
  // Assigning over a live lease would drop its mutex before its lock.
  NcclLease& operator=(NcclLease&&) = delete;
  ~NcclLease();

  // The outcome of `call` (ncclAllReduce, ncclGroupEnd ...) on this communicator, which
  // returned `r`: ncclInProgress is polled until NCCL has finished the call (connecting the
  // links at the first collective waits for the peers), within the set-up timeout and while the
  // peers live. A failure aborts the communicator and names the call, the device and the ranks.
  Status Settle(ncclResult_t r, const char* call);

 private:
  friend StatusOr<NcclLease> LeaseNcclComm(Communicator& comm, int device);
  NcclLease(Communicator* comm, int device, uint64_t generation, std::shared_ptr<NcclGuard> guard,
            ncclComm_t nc);
  Communicator* comm_;
  int device_;
  uint64_t generation_;
  std::shared_ptr<NcclGuard> guard_;   // the communicator's enqueue lock, kept alive
  std::unique_lock<std::mutex> lock_;  // declared after guard_: released before it
  ncclComm_t nc_ = nullptr;
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
// Aborts the watched communicator (leaving its tombstone), unless it was already. Thread-safe.
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
