// ncclReduceScatter of equal parts (nccl_plan.h says how unequal ones are padded first).
#include <string>

#include "collectives/nccl/nccl_collectives.h"
#include "collectives/nccl/nccl_enqueue.h"

namespace kolo {

Status EnqueueNcclReduceScatter(Communicator& comm, int device, const void* send, void* recv,
                                size_t count, DataType dtype, ReduceOp op) {
  ncclDataType_t t;
  ncclRedOp_t o;
  if (!NcclDataType(dtype, &t)) {
    return UnimplementedError("NCCL has no " + std::string(DataTypeName(dtype)));
  }
  if (!NcclRedOp(op, &o)) {
    return UnimplementedError("NCCL has no reduction " + std::string(ReduceOpName(op)));
  }
  if (count == 0) return Status::OK();
  NcclEnqueue e;
  KOLO_RETURN_IF_ERROR(BeginNccl(comm, device, &e));
  KOLO_NCCL_ENQUEUE(e, ReduceScatter, send, recv, count, t, o, e.comm, e.stream);
  return Status::OK();
}

}  // namespace kolo
