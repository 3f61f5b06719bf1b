// The runtime's device path for the operations whose output kolo allocates: allgather,
// alltoall and reducescatter of tensors in GPU memory (issue 7; all-reduce and broadcast are in
// device_allreduce.h). For a Response whose tensors live on CUDA device `device`, each:
//   1. checks that this process has the device, and makes kolo's stream of it wait for the
//      tensor's ready event (recorded on the framework's stream at submission, so kolo reads
//      what the framework's kernels wrote without synchronizing the host);
//   2. allocates the output on the device (cudaMalloc; OutputBuffer's deleter frees it with
//      cudaFree on that device, so a binding hands it to its framework as a tensor there);
//   3. enqueues the NCCL calls on kolo's stream (collectives/nccl/nccl_collectives.h):
//        allgather      ncclAllGather for equal parts, else grouped ncclBroadcast per rank;
//        alltoall       grouped ncclSend/ncclRecv, the splits exchanged by negotiation;
//        reducescatter  prescale fused into a staging copy when needed, ncclReduceScatter of
//                       padded parts when they are unequal (nccl_plan.h says why), then the
//                       postscale (Average: Sum, then 1/size) in place;
//   4. waits for the stream by polling, with the peer watch and NCCL's asynchronous errors
//      (WaitForNccl), so the handle completes only when the output is written.
// Reductions follow the device all-reduce: NCCL reduces float16/bfloat16 in their own type;
// int16, uint16 and bool cannot be reduced (NCCL has none), nor integers averaged: Enqueue
// refuses those at submission (DeviceReductionRefusal). Allgather and alltoall move bytes, so
// every dtype works. Without CUDA and NCCL in the build every call fails saying so.
#ifndef KOLO_RUNTIME_DEVICE_OPS_H_
#define KOLO_RUNTIME_DEVICE_OPS_H_

#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "collectives/communicator.h"
#include "runtime/handle.h"

namespace kolo {

// Why CUDA tensors of `dtype` cannot be reduced with `op` on the device ("NCCL has no int16",
// "Average of integer CUDA tensors is not supported (use Sum)"), or "" when they can.
std::string DeviceReductionRefusal(DataType dtype, ReduceOp op);

// part_bytes[r]: bytes of rank r's input (this rank's is `input`). The output holds every part
// in rank order; its shape is the caller's to set. `ready_event` is waited for and destroyed.
StatusOr<OutputBuffer> DeviceAllgather(Communicator& comm, int device, const void* input,
                                       const std::vector<size_t>& part_bytes, void* ready_event);

// send_bytes[q]: the bytes of `input` (consecutive, in rank order) for rank q; recv_bytes[q]:
// the bytes rank q sends here, stored in rank order.
StatusOr<OutputBuffer> DeviceAlltoall(Communicator& comm, int device, const void* input,
                                      const std::vector<size_t>& send_bytes,
                                      const std::vector<size_t>& recv_bytes, void* ready_event);

// counts[r]: elements of the reduction rank r receives (Horovod's row split times the row);
// `op` Sum or Average; output = postscale * sum_q(prescale * input_q)[rows of this rank]
// (/ size for Average). The output buffer may be larger than counts[rank] elements (a padded
// slot): the shape the caller sets is what counts.
StatusOr<OutputBuffer> DeviceReducescatter(Communicator& comm, int device, const void* input,
                                           const std::vector<size_t>& counts, DataType dtype,
                                           ReduceOp op, double prescale, double postscale,
                                           void* ready_event);

}  // namespace kolo

#endif  // KOLO_RUNTIME_DEVICE_OPS_H_
