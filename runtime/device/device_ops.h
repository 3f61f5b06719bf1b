// The runtime's device path for the operations other than all-reduce (fused:
// fusion/device_allreduce.h): broadcast, and allgather, alltoall and reducescatter, whose
// output kolo allocates. Each call checks the device, makes kolo's stream wait for the tensor's
// ready event (and destroys it, whatever happens), allocates the output on that stream
// (stream-ordered; not the broadcast, which works in the caller's output), enqueues the device
// entry that `choice` picks from collective_table.h (NCCL's) and returns without waiting for the
// GPU; the finaliser (device_finaliser.h) completes the handle once the GPU is done. Why each step
// is so, and how memory is given back: docs/device-path.md. Without CUDA and NCCL in the build
// every call fails saying so.
#ifndef KOLO_RUNTIME_DEVICE_DEVICE_OPS_H_
#define KOLO_RUNTIME_DEVICE_DEVICE_OPS_H_

#include <memory>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "collectives/communicator.h"
#include "collectives/select/collective_choice.h"
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

// Gives back device memory of a DeviceOpResult once the work on kolo's stream of `comm`'s
// process set on `device` before this call no longer needs it: stream-ordered memory with
// cudaFreeAsync on that stream (never waits), cudaMalloc'd memory with cudaFree. Any thread; a
// no-op for nullptr.
void ReleaseAfterKoloStream(const Communicator& comm, int device,
                            std::unique_ptr<void, BufferFree> memory);

// Broadcast of `bytes` from `root`: its input, copied to its output when they differ, into
// every rank's output. Enqueues only.
Status DeviceBroadcast(Communicator& comm, const CollectiveChoice& choice, int device,
                       const void* input, void* output, size_t bytes, int root, void* ready_event);

// part_bytes[r]: bytes of rank r's input (this rank's is `input`). The output holds every part
// in rank order. `ready_event` is waited for and destroyed. Enqueues only (see above).
Status DeviceAllgather(Communicator& comm, const CollectiveChoice& choice, int device,
                       const void* input, const std::vector<size_t>& part_bytes, void* ready_event,
                       DeviceOpResult* result);

// send_bytes[q]: the bytes of `input` (consecutive, in rank order) for rank q; recv_bytes[q]:
// the bytes rank q sends here, stored in rank order. Enqueues only.
Status DeviceAlltoall(Communicator& comm, const CollectiveChoice& choice, int device,
                      const void* input, const std::vector<size_t>& send_bytes,
                      const std::vector<size_t>& recv_bytes, void* ready_event,
                      DeviceOpResult* result);

// counts[r]: elements of the reduction rank r receives (Horovod's row split times the row);
// `op` Sum or Average; output = postscale * sum_q(prescale * input_q)[rows of this rank]
// (/ size for Average). The output buffer may be larger than counts[rank] elements (a padded
// slot): the shape the caller sets is what counts. Enqueues only.
Status DeviceReducescatter(Communicator& comm, const CollectiveChoice& choice, int device,
                           const void* input, const std::vector<size_t>& counts, DataType dtype,
                           ReduceOp op, double prescale, double postscale, void* ready_event,
                           DeviceOpResult* result);

}  // namespace kolo

#endif  // KOLO_RUNTIME_DEVICE_DEVICE_OPS_H_
