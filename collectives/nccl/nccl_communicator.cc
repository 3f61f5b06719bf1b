#include "collectives/nccl/nccl_communicator.h"

#include <string>

#include "collectives/cuda/cuda_call.h"
#include "collectives/nccl/nccl_comm.h"
#include "collectives/nccl/nccl_collectives.h"
#include "collectives/nccl/nccl_enqueue.h"
#include "collectives/nccl/nccl_lib.h"

namespace kolo {

namespace {

Status Types(DataType dtype, ReduceOp op, ncclDataType_t* t, ncclRedOp_t* o) {
  if (!NcclDataType(dtype, t)) {
    return UnimplementedError("NCCL has no " + std::string(DataTypeName(dtype)));
  }
  if (!NcclRedOp(op, o)) return UnimplementedError("NCCL has no such reduction");
  return Status::OK();
}

}  // namespace

Status NcclCommunicator::Allreduce(const void* send, void* recv, size_t count, DataType dtype,
                                   ReduceOp op) {
  ncclDataType_t t;
  ncclRedOp_t o;
  KOLO_RETURN_IF_ERROR(Types(dtype, op, &t, &o));
  cudaStream_t stream = nullptr;
  {
    NcclEnqueue e;
    KOLO_RETURN_IF_ERROR(BeginNccl(host_, device_, &e));
    KOLO_NCCL_ENQUEUE(e, AllReduce, send, recv, count, t, o, e.comm, e.stream);
    stream = e.stream;
  }  // the lease ends before the wait, which may abort the communicator
  return WaitForNccl(host_, device_, stream, "ncclAllReduce");
}

Status NcclCommunicator::ReduceScatter(const void* send, void* recv,
                                       const std::vector<size_t>& counts, DataType dtype,
                                       ReduceOp op) {
  for (size_t c : counts) {
    if (c != counts.front()) {
      return UnimplementedError("ncclReduceScatter needs equal parts on every rank");
    }
  }
  ncclDataType_t t;
  ncclRedOp_t o;
  KOLO_RETURN_IF_ERROR(Types(dtype, op, &t, &o));
  cudaStream_t stream = nullptr;
  {
    NcclEnqueue e;
    KOLO_RETURN_IF_ERROR(BeginNccl(host_, device_, &e));
    KOLO_NCCL_ENQUEUE(e, ReduceScatter, send, recv, counts.front(), t, o, e.comm, e.stream);
    stream = e.stream;
  }  // the lease ends before the wait, which may abort the communicator
  return WaitForNccl(host_, device_, stream, "ncclReduceScatter");
}

Status NcclCommunicator::Allgatherv(const void* send, size_t send_bytes, void* recv,
                                    const std::vector<size_t>& recv_bytes) {
  if (recv_bytes.size() == static_cast<size_t>(Size()) && recv_bytes[Rank()] != send_bytes) {
    return InvalidArgumentError("allgatherv: this rank sends " + std::to_string(send_bytes) +
                                " bytes, its part is " + std::to_string(recv_bytes[Rank()]));
  }
  KOLO_ASSIGN_OR_RETURN(cudaStream_t stream, KoloStream(host_, device_));
  KOLO_RETURN_IF_ERROR(EnqueueNcclAllgatherv(host_, device_, send, recv, recv_bytes));
  return WaitForNccl(host_, device_, stream, "ncclAllGather");
}

Status NcclCommunicator::Alltoallv(const void* send, const std::vector<size_t>& send_bytes,
                                   void* recv, const std::vector<size_t>& recv_bytes) {
  KOLO_ASSIGN_OR_RETURN(cudaStream_t stream, KoloStream(host_, device_));
  KOLO_RETURN_IF_ERROR(EnqueueNcclAlltoallv(host_, device_, send, send_bytes, recv, recv_bytes));
  return WaitForNccl(host_, device_, stream, "ncclSend/ncclRecv");
}

Status NcclCommunicator::Broadcast(void* buffer, size_t bytes, int root) {
  cudaStream_t stream = nullptr;
  {
    NcclEnqueue e;
    KOLO_RETURN_IF_ERROR(BeginNccl(host_, device_, &e));
    KOLO_NCCL_ENQUEUE(e, Broadcast, buffer, buffer, bytes, ncclUint8, root, e.comm, e.stream);
    stream = e.stream;
  }  // the lease ends before the wait, which may abort the communicator
  return WaitForNccl(host_, device_, stream, "ncclBroadcast");
}

}  // namespace kolo
