// All-gather of unequal parts over NCCL (nccl_plan.h: ncclAllGather, or one grouped
// ncclBroadcast per rank).
#include <string>

#include "collectives/nccl/nccl_collectives.h"
#include "collectives/nccl/nccl_enqueue.h"
#include "collectives/nccl/nccl_plan.h"

namespace kolo {

Status EnqueueNcclAllgatherv(Communicator& comm, int device, const void* send, void* recv,
                             const std::vector<size_t>& part_bytes) {
  if (part_bytes.size() != static_cast<size_t>(comm.Size())) {
    return InternalError("allgatherv: " + std::to_string(part_bytes.size()) + " parts for " +
                         std::to_string(comm.Size()) + " ranks");
  }
  NcclEnqueue e;
  KOLO_RETURN_IF_ERROR(BeginNccl(comm, device, &e));
  if (EqualParts(part_bytes)) {
    if (part_bytes.front() == 0) return Status::OK();
    KOLO_NCCL_ENQUEUE(e, AllGather, send, recv, part_bytes.front(), ncclUint8, e.comm, e.stream);
    return Status::OK();
  }
  const std::vector<size_t> offsets = PartOffsets(part_bytes);
  char* out = static_cast<char*>(recv);
  KOLO_NCCL_CALL(e.api, GroupStart);
  Status body;
  for (int r = 0; r < comm.Size() && body.ok(); ++r) {
    if (part_bytes[r] == 0) continue;  // every rank knows every size: all skip alike
    // The root reads its own input; the others' send argument is not read.
    const void* from = r == comm.Rank() ? send : out + offsets[r];
    const ncclResult_t res = e.api->Broadcast(from, out + offsets[r], part_bytes[r], ncclUint8, r,
                                              e.comm, e.stream);
    if (res != ncclSuccess) {
      body = NcclError(res, "ncclBroadcast").AddContext("part of rank " + std::to_string(r));
    }
  }
  return EndNcclGroup(e, body);
}

}  // namespace kolo
