// The release of a device operation's memory after its work (device_ops.h, "Memory").
#include <utility>

#include "kolo/config.h"
#include "runtime/device/device_ops.h"

#if KOLO_WITH_CUDA && KOLO_WITH_NCCL
#include "collectives/cuda/device.h"
#include "collectives/nccl/nccl_comm.h"
#endif

namespace kolo {

void ReleaseAfterKoloStream(const Communicator& comm, int device,
                            std::unique_ptr<void, BufferFree> memory) {
  if (!memory) return;
#if KOLO_WITH_CUDA && KOLO_WITH_NCCL
  if (memory.get_deleter().stream_ordered) {
    // The stream exists: this memory was taken in its order.
    auto stream = KoloStream(comm, device);
    if (stream.ok()) {
      FreeOnStream(device, *stream, memory.release());
      return;
    }
  }
#endif
  (void)comm;
  (void)device;
  memory.reset();  // cudaMalloc'd (the deleter's cudaFree), or no CUDA in the build
}

}  // namespace kolo
