// What every NCCL call of collectives/nccl/ needs before it is enqueued: the loaded library,
// the NCCL communicator of (kolo Communicator, device), leased (nccl_comm.h: an abort on the
// finaliser's thread waits for the lease, so it cannot free the communicator under the call),
// kolo's stream of the device, with the device current until the NcclEnqueue goes out of
// scope. End its scope before waiting for the stream (WaitForNccl may abort). Internal to
// collectives/nccl/.
#ifndef KOLO_COLLECTIVES_NCCL_NCCL_ENQUEUE_H_
#define KOLO_COLLECTIVES_NCCL_NCCL_ENQUEUE_H_

#include <cuda_runtime.h>
#include <nccl.h>

#include <optional>
#include <utility>

#include "base/status.h"
#include "collectives/communicator.h"
#include "collectives/cuda/cuda_call.h"
#include "collectives/nccl/nccl_comm.h"
#include "collectives/nccl/nccl_lib.h"

namespace kolo {

struct NcclEnqueue {
  const NcclApi* api = nullptr;
  std::optional<NcclLease> lease;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  std::optional<CudaDeviceScope> device;  // the buffers' device, current until the end
  NcclEnqueue() = default;
  NcclEnqueue(const NcclEnqueue&) = delete;
  NcclEnqueue& operator=(const NcclEnqueue&) = delete;
};

inline Status BeginNccl(Communicator& host, int device, NcclEnqueue* e) {
  KOLO_ASSIGN_OR_RETURN(e->api, Nccl());
  KOLO_ASSIGN_OR_RETURN(e->stream, KoloStream(device));
  KOLO_ASSIGN_OR_RETURN(NcclLease lease, LeaseNcclComm(host, device));
  e->comm = lease.get();
  e->lease.emplace(std::move(lease));
  e->device.emplace(device);
  return Status::OK();
}

// Ends an ncclGroupStart whose body failed with `body` (the group must be closed either way);
// returns the body's error, or ncclGroupEnd's.
inline Status EndNcclGroup(const NcclApi* api, Status body) {
  const ncclResult_t r = api->GroupEnd();
  if (!body.ok()) return body;
  if (r != ncclSuccess) return NcclError(r, "ncclGroupEnd");
  return Status::OK();
}

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_NCCL_NCCL_ENQUEUE_H_
