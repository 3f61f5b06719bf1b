// Fused all-reduce of tensors in GPU memory: the device side of fusion (the host side is
// executor.h). For a Response whose tensors live on CUDA device `device`, on kolo's stream of
// that device:
//   1. wait for each tensor's ready event (recorded on the framework's stream at submission,
//      so kolo reads what the framework's kernels wrote, without synchronizing the host);
//   2. pack the tensors into the device's fusion buffer with one batched kernel per 128
//      tensors, prescale fused (fusion/cuda/device_pack.h); a single tensor without prescale
//      skips the buffer and is reduced in place in its output;
//   3. the algorithm the selector picks for device memory (NCCL flat or hierarchical,
//      collectives/nccl/) on the buffer, in place;
//   4. unpack with the postscale fused (Average: Sum, then 1/size for floating dtypes).
// Run only enqueues: it returns once the work is on kolo's stream, and the caller (the runtime)
// hands the stream's completion to its finaliser, which completes the handles when the GPU is
// done, so the background thread never waits for the GPU. The
// exception is an algorithm that needs the host between its steps (nccl_hierarchical, through
// NcclCommunicator): it waits inside, on the background thread, as before; only its unpack is
// left to the finaliser.
// float16 and bfloat16 are reduced by NCCL in their own type. Integer Average on the device is
// not supported (kUnimplemented). Without CUDA in the build, or without a device, every call
// fails with a message saying which. The runtime's other device operations, and a joined rank's
// part in a device all-reduce, are in runtime/device/.
#ifndef KOLO_FUSION_DEVICE_ALLREDUCE_H_
#define KOLO_FUSION_DEVICE_ALLREDUCE_H_

#include <map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "collectives/communicator.h"
#include "collectives/select/registry.h"
#include "fusion/executor.h"

namespace kolo {

class DeviceAllreduce {
 public:
  DeviceAllreduce() = default;
  ~DeviceAllreduce();
  DeviceAllreduce(const DeviceAllreduce&) = delete;
  DeviceAllreduce& operator=(const DeviceAllreduce&) = delete;

  // `ready_events` (may hold nullptrs) are waited for and destroyed; Average divides by
  // comm's size. Enqueues only (see above); an error means the
  // work may be partly enqueued, and its completion must still be waited for before the
  // outputs are reused (the caller queues the error behind it in the finaliser).
  Status Run(Communicator& comm, const AllreduceSelector& selector, int device,
             const AllreduceJob& job, const std::vector<void*>& ready_events);

 private:
  // Fusion buffer per device: pointer and bytes, grown when needed and kept.
  std::map<int, std::pair<void*, size_t>> buffers_;
};

}  // namespace kolo

#endif  // KOLO_FUSION_DEVICE_ALLREDUCE_H_
