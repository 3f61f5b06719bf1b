// The first step of every device operation of the runtime (device_ops.h): the device must exist
// in this process, and kolo's stream of it waits for the tensor's ready event. Only in files
// built with CUDA and NCCL.
#ifndef KOLO_RUNTIME_DEVICE_STREAM_H_
#define KOLO_RUNTIME_DEVICE_STREAM_H_

#include <cuda_runtime.h>

#include <string>

#include "base/status.h"
#include "collectives/cuda/cuda_call.h"
#include "collectives/cuda/device.h"
#include "collectives/nccl/nccl_comm.h"
#include "runtime/device_allreduce.h"

namespace kolo {

// kolo's stream of `device`, ordered after `ready_event` (may be nullptr), which is destroyed
// whatever happens. kFailedPrecondition when this process has no such device.
inline StatusOr<cudaStream_t> StreamAfterReadyEvent(int device, void* ready_event) {
  std::string why;
  if (CudaDeviceCount(&why) <= device) {
    DestroyReadyEvent(ready_event);
    return FailedPreconditionError("tensor on cuda:" + std::to_string(device) +
                                   ", but this process has no such CUDA device (" + why + ")");
  }
  auto stream = KoloStream(device);
  if (!stream.ok() || ready_event == nullptr) {
    DestroyReadyEvent(ready_event);
    return stream;
  }
  const cudaError_t e = cudaStreamWaitEvent(*stream, static_cast<cudaEvent_t>(ready_event), 0);
  DestroyReadyEvent(ready_event);
  if (e != cudaSuccess) return CudaError(e, "cudaStreamWaitEvent (the tensor's ready event)");
  return stream;
}

// An output of `bytes` on `device`, owned by the buffer (freed with cudaFree on that device).
inline StatusOr<OutputBuffer> DeviceOutput(int device, size_t bytes) {
  KOLO_ASSIGN_OR_RETURN(void* p, AllocateDeviceMemory(device, bytes));
  OutputBuffer out;
  out.data = std::unique_ptr<void, OutputBuffer::Free>(p, OutputBuffer::Free{device});
  return out;
}

}  // namespace kolo

#endif  // KOLO_RUNTIME_DEVICE_STREAM_H_
