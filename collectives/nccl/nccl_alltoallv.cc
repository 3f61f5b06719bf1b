// All-to-all of unequal parts over NCCL: an ncclSend and an ncclRecv per peer in one group, so
// NCCL runs them concurrently and no pair of ranks waits on another's order.
#include <string>

#include "collectives/nccl/nccl_collectives.h"
#include "collectives/nccl/nccl_enqueue.h"
#include "collectives/nccl/nccl_plan.h"

namespace kolo {

Status EnqueueNcclAlltoallv(Communicator& comm, int device, const void* send,
                            const std::vector<size_t>& send_bytes, void* recv,
                            const std::vector<size_t>& recv_bytes) {
  const size_t n = static_cast<size_t>(comm.Size());
  if (send_bytes.size() != n || recv_bytes.size() != n) {
    return InternalError("alltoallv: " + std::to_string(send_bytes.size()) + " send and " +
                         std::to_string(recv_bytes.size()) + " receive sizes for " +
                         std::to_string(n) + " ranks");
  }
  const std::vector<size_t> send_at = PartOffsets(send_bytes), recv_at = PartOffsets(recv_bytes);
  // Even a rank with nothing to move asks for the NCCL communicator: making it is collective.
  NcclEnqueue e;
  KOLO_RETURN_IF_ERROR(BeginNccl(comm, device, &e));
  if (send_at.back() == 0 && recv_at.back() == 0) return Status::OK();
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  KOLO_NCCL_CALL(e.api, GroupStart);
  Status body;
  for (size_t q = 0; q < n && body.ok(); ++q) {
    const int peer = static_cast<int>(q);
    // A zero-byte transfer is left out on both sides: q's receive size from us is our send
    // size to q, and both come from the same splits matrix.
    if (send_bytes[q] > 0) {
      const ncclResult_t r =
          e.api->Send(in + send_at[q], send_bytes[q], ncclUint8, peer, e.comm, e.stream);
      if (r != ncclSuccess) body = NcclError(r, "ncclSend").AddContext("to rank " + std::to_string(q));
    }
    if (body.ok() && recv_bytes[q] > 0) {
      const ncclResult_t r =
          e.api->Recv(out + recv_at[q], recv_bytes[q], ncclUint8, peer, e.comm, e.stream);
      if (r != ncclSuccess) body = NcclError(r, "ncclRecv").AddContext("from rank " + std::to_string(q));
    }
  }
  return EndNcclGroup(e, body);
}

}  // namespace kolo
