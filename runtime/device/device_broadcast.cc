// Broadcast of a CUDA tensor (device_ops.h): the root's input copied to its output when they
// differ, then the device entry of collective_table.h (NCCL's) in place on the output.
// Enqueued on kolo's stream, after the ready event, and not waited for.
#include <string>

#include "collectives/cuda/device.h"
#include "kolo/config.h"
#include "runtime/device/device_ops.h"

#if KOLO_WITH_CUDA && KOLO_WITH_NCCL
#include "runtime/device/device_stream.h"
#endif

namespace kolo {

Status DeviceBroadcast(Communicator& comm, const CollectiveChoice& choice, int device,
                       const void* input, void* output, size_t bytes, int root, void* ready_event) {
#if KOLO_WITH_CUDA && KOLO_WITH_NCCL
  KOLO_ASSIGN_OR_RETURN(cudaStream_t stream, StreamAfterReadyEvent(comm, device, ready_event));
  if (bytes == 0) return Status::OK();
  CollectiveInput in;
  in.memory = MemoryKind::kCuda;
  KOLO_ASSIGN_OR_RETURN(const BroadcastEntry* entry, choice.PickBroadcast(in));
  CudaDeviceScope scope(device);
  if (comm.Rank() == root && output != input) {
    KOLO_CUDA_CALL(cudaMemcpyAsync(output, input, bytes, cudaMemcpyDeviceToDevice, stream));
  }
  return entry->enqueue(comm, device, output, bytes, root)
      .AddContext(std::string(entry->name) + " broadcast");
#else
  (void)comm, (void)choice, (void)input, (void)output, (void)bytes, (void)root;
  DestroyReadyEvent(ready_event);
  return UnimplementedError("tensor on cuda:" + std::to_string(device) +
                            ", but kolo was built without CUDA and NCCL");
#endif
}

}  // namespace kolo
