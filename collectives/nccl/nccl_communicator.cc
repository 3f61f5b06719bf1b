#include "collectives/nccl/nccl_communicator.h"

#include <optional>
#include <string>
#include <utility>

#include "collectives/cuda/cuda_call.h"
#include "collectives/nccl/nccl_comm.h"
#include "collectives/nccl/nccl_lib.h"

namespace kolo {

namespace {

// Everything a call needs, with the device current and the NCCL communicator leased for the
// scope. The scope ends before the wait: WaitForNccl may abort, which waits for leases.
struct Enqueue {
  const NcclApi* api = nullptr;
  std::optional<NcclLease> lease;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int previous = -1;
  ~Enqueue() {
    if (previous >= 0) cudaSetDevice(previous);
  }
};

Status Begin(Communicator& host, int device, Enqueue* e) {
  KOLO_ASSIGN_OR_RETURN(e->api, Nccl());
  KOLO_ASSIGN_OR_RETURN(e->stream, KoloStream(device));
  KOLO_ASSIGN_OR_RETURN(NcclLease lease, LeaseNcclComm(host, device));
  e->comm = lease.get();
  e->lease.emplace(std::move(lease));
  KOLO_CUDA_CALL(cudaGetDevice(&e->previous));
  KOLO_CUDA_CALL(cudaSetDevice(device));
  return Status::OK();
}

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
    Enqueue e;
    KOLO_RETURN_IF_ERROR(Begin(host_, device_, &e));
    KOLO_NCCL_CALL(e.api, AllReduce, send, recv, count, t, o, e.comm, e.stream);
    stream = e.stream;
  }
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
    Enqueue e;
    KOLO_RETURN_IF_ERROR(Begin(host_, device_, &e));
    KOLO_NCCL_CALL(e.api, ReduceScatter, send, recv, counts.front(), t, o, e.comm, e.stream);
    stream = e.stream;
  }
  return WaitForNccl(host_, device_, stream, "ncclReduceScatter");
}

Status NcclCommunicator::Allgatherv(const void* send, size_t send_bytes, void* recv,
                                    const std::vector<size_t>& recv_bytes) {
  for (size_t b : recv_bytes) {
    if (b != send_bytes) return UnimplementedError("ncclAllGather needs equal parts on every rank");
  }
  cudaStream_t stream = nullptr;
  {
    Enqueue e;
    KOLO_RETURN_IF_ERROR(Begin(host_, device_, &e));
    KOLO_NCCL_CALL(e.api, AllGather, send, recv, send_bytes, ncclUint8, e.comm, e.stream);
    stream = e.stream;
  }
  return WaitForNccl(host_, device_, stream, "ncclAllGather");
}

Status NcclCommunicator::Broadcast(void* buffer, size_t bytes, int root) {
  cudaStream_t stream = nullptr;
  {
    Enqueue e;
    KOLO_RETURN_IF_ERROR(Begin(host_, device_, &e));
    KOLO_NCCL_CALL(e.api, Broadcast, buffer, buffer, bytes, ncclUint8, root, e.comm, e.stream);
    stream = e.stream;
  }
  return WaitForNccl(host_, device_, stream, "ncclBroadcast");
}

}  // namespace kolo
