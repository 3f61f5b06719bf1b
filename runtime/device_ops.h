// The runtime's device path for the operations whose output kolo allocates: allgather,
// alltoall and reducescatter of tensors in GPU memory (all-reduce and broadcast are in
// device_allreduce.h). For a Response whose tensors live on CUDA device `device`, each:
//   1. checks that this process has the device, and makes kolo's stream of it wait for the
//      tensor's ready event (recorded on the framework's stream at submission, so kolo reads
//      what the framework's kernels wrote without synchronizing the host);
//   2. allocates the output on the device, ordered on kolo's stream (below);
//   3. enqueues the NCCL calls on kolo's stream (collectives/nccl/nccl_collectives.h), each
//      under an NcclLease that ends with the call:
//        allgather      ncclAllGather for equal parts, else grouped ncclBroadcast per rank;
//        alltoall       grouped ncclSend/ncclRecv, the splits exchanged by negotiation;
//        reducescatter  prescale fused into a staging copy when needed, ncclReduceScatter of
//                       padded parts when they are unequal (nccl_plan.h says why), then the
//                       postscale (Average: Sum, then 1/size) in place;
//   and returns without waiting for the GPU. The caller (Runtime, runtime_device.cc) records a
//   completion event behind the work and hands it to the finaliser (device_finaliser.h), whose
//   callback gives the output to the handle and completes it once the GPU is done, so the
//   background thread never blocks on a GPU.
//
// Memory. Outputs and staging come from CUDA's stream-ordered allocator (cudaMallocAsync on
// kolo's stream), so neither taking nor giving back memory synchronizes the device:
//   - reducescatter's staging copy is used by kolo's stream only, so it is given back with
//     cudaFreeAsync on that stream right after the last enqueue that reads it: stream order
//     keeps it alive until the reduce-scatter has read it, with nothing to carry to the
//     finaliser and nothing for its callback to free. (Freeing it in the callback would need
//     cudaFree there, which may synchronize the device from the finaliser's thread, and so
//     wait behind later work that only the finaliser can abort.)
//   - an output handed to the handle may be freed by the framework at any time, with its own
//     kernels still queued on it on a stream kolo cannot see: its deleter (BufferFree) waits
//     for the device before freeing (cudaFree would not wait for stream-ordered memory). A
//     failed operation's output, or one whose handle its caller dropped unwaited, is never
//     handed out: the callback gives it back on kolo's stream (ReleaseAfterKoloStream),
//     behind whatever of the work is still draining. Left: a caller that drops its handle in
//     the instant between its completion and the end of the callback leaves the last
//     reference to the callback, and the deleter's wait for the device then runs on the
//     finaliser's thread (correct, but that thread waits for the GPU meanwhile).
//   On a device without the stream-ordered allocator (some virtualised GPUs) both fall back to
//   cudaMalloc; the staging is then kept in DeviceOpResult until the callback, and what the
//   callback frees goes with cudaFree (which may then synchronize the device, on the finaliser's
//   thread: the price of that fallback).
// Reductions follow the device all-reduce: NCCL reduces float16/bfloat16 in their own type;
// int16, uint16 and bool cannot be reduced (NCCL has none), nor integers averaged: Enqueue
// refuses those at submission (DeviceReductionRefusal). Allgather and alltoall move bytes, so
// every dtype works. Without CUDA and NCCL in the build every call fails saying so.
#ifndef KOLO_RUNTIME_DEVICE_OPS_H_
#define KOLO_RUNTIME_DEVICE_OPS_H_

#include <memory>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "collectives/communicator.h"
#include "runtime/handle.h"

namespace kolo {

// Why CUDA tensors of `dtype` cannot be reduced with `op` on the device ("NCCL has no int16",
// "Average of integer CUDA tensors is not supported (use Sum)", Adasum), or "" when they can.
std::string DeviceReductionRefusal(DataType dtype, ReduceOp op);

// What an enqueued device operation leaves to its completion. Filled as far as the operation
// got, on failure too: work enqueued before the failure may still write the output or read the
// staging, so the caller keeps this until kolo's stream has passed the work (the finaliser's
// callback), then gives the output to the handle or, on failure, releases it.
struct DeviceOpResult {
  // Kolo's, on the device; its shape is the caller's to set. Written once the stream gets
  // there, not when the call returns.
  OutputBuffer output;
  // Set only on a device without the stream-ordered allocator (see above): reducescatter's
  // staging copy, to be released after the work.
  std::unique_ptr<void, BufferFree> staging;
};

// Gives back device memory of a DeviceOpResult once the work on kolo's stream of `device`
// before this call no longer needs it: stream-ordered memory with cudaFreeAsync on that
// stream (never waits), cudaMalloc'd memory with cudaFree. Any thread; a no-op for nullptr.
void ReleaseAfterKoloStream(int device, std::unique_ptr<void, BufferFree> memory);

// part_bytes[r]: bytes of rank r's input (this rank's is `input`). The output holds every part
// in rank order. `ready_event` is waited for and destroyed. Enqueues only (see above).
Status DeviceAllgather(Communicator& comm, int device, const void* input,
                       const std::vector<size_t>& part_bytes, void* ready_event,
                       DeviceOpResult* result);

// send_bytes[q]: the bytes of `input` (consecutive, in rank order) for rank q; recv_bytes[q]:
// the bytes rank q sends here, stored in rank order. Enqueues only.
Status DeviceAlltoall(Communicator& comm, int device, const void* input,
                      const std::vector<size_t>& send_bytes, const std::vector<size_t>& recv_bytes,
                      void* ready_event, DeviceOpResult* result);

// counts[r]: elements of the reduction rank r receives (Horovod's row split times the row);
// `op` Sum or Average; output = postscale * sum_q(prescale * input_q)[rows of this rank]
// (/ size for Average). The output buffer may be larger than counts[rank] elements (a padded
// slot): the shape the caller sets is what counts. Enqueues only.
Status DeviceReducescatter(Communicator& comm, int device, const void* input,
                           const std::vector<size_t>& counts, DataType dtype, ReduceOp op,
                           double prescale, double postscale, void* ready_event,
                           DeviceOpResult* result);

}  // namespace kolo

#endif  // KOLO_RUNTIME_DEVICE_OPS_H_
