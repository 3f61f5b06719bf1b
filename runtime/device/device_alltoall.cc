// Alltoall of a CUDA tensor (device_ops.h): enqueued on kolo's stream, not waited for.
#include <numeric>
#include <string>

#include "collectives/cuda/device.h"
#include "kolo/config.h"
#include "runtime/device/device_ops.h"

#if KOLO_WITH_CUDA && KOLO_WITH_NCCL
#include "runtime/device/device_stream.h"
#endif

namespace kolo {

Status DeviceAlltoall(Communicator& comm, const CollectiveChoice& choice, int device,
                      const void* input, const std::vector<size_t>& send_bytes,
                      const std::vector<size_t>& recv_bytes, void* ready_event,
                      DeviceOpResult* result) {
#if KOLO_WITH_CUDA && KOLO_WITH_NCCL
  KOLO_ASSIGN_OR_RETURN(cudaStream_t stream, StreamAfterReadyEvent(comm, device, ready_event));
  CollectiveInput in;
  in.memory = MemoryKind::kCuda;
  KOLO_ASSIGN_OR_RETURN(const AlltoallEntry* entry, choice.PickAlltoall(in));
  const size_t total = std::accumulate(recv_bytes.begin(), recv_bytes.end(), size_t{0});
  KOLO_ASSIGN_OR_RETURN(result->output.data, AllocateForKoloStream(device, stream, total));
  return entry->enqueue(comm, device, input, send_bytes, result->output.data.get(), recv_bytes)
      .AddContext(std::string(entry->name) + " all-to-all (send/receive)");
#else
  (void)comm, (void)choice, (void)input, (void)send_bytes, (void)recv_bytes, (void)result;
  DestroyReadyEvent(ready_event);
  return UnimplementedError("tensor on cuda:" + std::to_string(device) +
                            ", but kolo was built without CUDA and NCCL");
#endif
}

}  // namespace kolo
