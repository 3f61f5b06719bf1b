// Completion of GPU work through the finaliser (runtime/finaliser.h): after the background
// thread has enqueued an operation's work on kolo's stream of a device (ready-event waits,
// pack, NCCL, unpack), it records a completion event behind that work and hands the event, the
// device, the communicators to watch and a callback (the one that completes the handles) to
// the finaliser, then goes on with the next Response without waiting for the GPU.
//
// While the event is pending the finaliser polls, as WaitForNccl does on the background thread
// for the synchronous compositions (collectives/nccl/nccl_comm.h): cudaEventQuery, NCCL's
// asynchronous error of each watched communicator's NCCL communicator on that device, and
// about once a second each watched communicator's CheckLiveness (the peer watch: "rank 1 (pid
// 124 on host) is gone"). On a failure the watched NCCL communicators are aborted
// (ncclCommAbort), so the stream drains instead of hanging, and once it has (the event has
// passed, or the finaliser's drain timeout) the callback gets the error (kUnavailable for a lost
// peer) with the work's name for context: the caller's buffers are its own again only then. Work
// enqueued on an NCCL communicator that was aborted meanwhile (by an earlier failure) fails too:
// its result is lost.
//
// Generic on purpose: any device operation (all-reduce, broadcast, and the all-gather,
// all-to-all and reduce-scatter of CUDA tensors) completes through EnqueueDeviceCompletion.
#ifndef KOLO_RUNTIME_DEVICE_DEVICE_FINALISER_H_
#define KOLO_RUNTIME_DEVICE_DEVICE_FINALISER_H_

#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "runtime/finaliser.h"

namespace kolo {

// Records the completion event on kolo's stream of `device` (that of watched.front()'s process
// set) and queues `done` on `finaliser`
// behind every earlier item: it runs on the finaliser's thread with OK once everything enqueued
// on that stream before this call has finished, or with the error. `watched`: the kolo
// Communicators whose NCCL communicators (on `device`) carry the work, and whose liveness
// stands for the peers'; they must outlive the item (the runtime closes its finaliser before
// they go). `what` ("allreduce 'w'") prefixes the errors. When the event cannot be recorded
// (or the build has no CUDA), `done` still runs in its turn, with that error. Call it on the
// thread that enqueued the work, right after its last enqueue.
void EnqueueDeviceCompletion(Finaliser& finaliser, int device,
                             const std::vector<Communicator*>& watched, const std::string& what,
                             Finaliser::Callback done);

}  // namespace kolo

#endif  // KOLO_RUNTIME_DEVICE_DEVICE_FINALISER_H_
