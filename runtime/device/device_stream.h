// The first steps of every device operation of the runtime (device_ops.h): the device must
// exist in this process, kolo's stream of it waits for the tensor's ready event, and memory for
// the work is taken in the stream's order. Only in files built with CUDA and NCCL.
#ifndef KOLO_RUNTIME_DEVICE_DEVICE_STREAM_H_
#define KOLO_RUNTIME_DEVICE_DEVICE_STREAM_H_

#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "base/status.h"
#include "collectives/cuda/cuda_call.h"
#include "collectives/cuda/device.h"
#include "collectives/nccl/nccl_comm.h"
#include "runtime/handle.h"

namespace kolo {

// kolo's stream of `comm`'s process set on `device`, ordered after `ready_event` (may be
// nullptr), which is destroyed whatever happens. kFailedPrecondition when this process has no
// such device.
inline StatusOr<cudaStream_t> StreamAfterReadyEvent(const Communicator& comm, int device,
                                                    void* ready_event) {
  std::string why;
  if (CudaDeviceCount(&why) <= device) {
    DestroyReadyEvent(ready_event);
    return FailedPreconditionError("tensor on cuda:" + std::to_string(device) +
                                   ", but this process has no such CUDA device (" + why + ")");
  }
  auto stream = KoloStream(comm, device);
  if (!stream.ok() || ready_event == nullptr) {
    DestroyReadyEvent(ready_event);
    return stream;
  }
  const cudaError_t e = cudaStreamWaitEvent(*stream, static_cast<cudaEvent_t>(ready_event), 0);
  DestroyReadyEvent(ready_event);
  if (e != cudaSuccess) return CudaError(e, "cudaStreamWaitEvent (the tensor's ready event)");
  return stream;
}

// `bytes` on `device` for work on kolo's `stream` there, owned by the returned pointer: from
// the stream-ordered allocator where the device has one, else cudaMalloc (device_ops.h, "Memory",
// says why and what each means for freeing).
inline StatusOr<std::unique_ptr<void, BufferFree>> AllocateForKoloStream(int device,
                                                                        cudaStream_t stream,
                                                                        size_t bytes) {
  auto pooled = AllocateOnStream(device, stream, bytes);
  if (pooled.ok()) {
    return std::unique_ptr<void, BufferFree>(*pooled, BufferFree{device, true});
  }
  if (pooled.status().code() != StatusCode::kUnimplemented) return pooled.status();
  KOLO_ASSIGN_OR_RETURN(void* p, AllocateDeviceMemory(device, bytes));
  return std::unique_ptr<void, BufferFree>(p, BufferFree{device, false});
}

}  // namespace kolo

#endif  // KOLO_RUNTIME_DEVICE_DEVICE_STREAM_H_
