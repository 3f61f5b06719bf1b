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
  KOLO_ASSIGN_OR_RETURN(e->stream, KoloStream(host, device));
  KOLO_ASSIGN_OR_RETURN(NcclLease lease, LeaseNcclComm(host, device));
  e->comm = lease.get();
  e->lease.emplace(std::move(lease));
  e->device.emplace(device);
  return Status::OK();
}

// Ends an ncclGroupStart whose body failed with `body` (the group must be closed either way);
// returns the body's error, or ncclGroupEnd's once settled (on a non-blocking communicator the
// group's work may still be in progress when it returns).
inline Status EndNcclGroup(NcclEnqueue& e, Status body) {
  Status ended = e.lease->Settle(e.api->GroupEnd(), "ncclGroupEnd");
  return body.ok() ? ended : body;
}

}  // namespace kolo

// A call through the table on `e`'s (an NcclEnqueue's) communicator, settled
// (NcclLease::Settle); returns its failure as a Status.
#define KOLO_NCCL_ENQUEUE(e, fn, ...) \
  KOLO_RETURN_IF_ERROR((e).lease->Settle((e).api->fn(__VA_ARGS__), "nccl" #fn))

#endif  // KOLO_COLLECTIVES_NCCL_NCCL_ENQUEUE_H_
