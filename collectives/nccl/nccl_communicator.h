// A kolo Communicator whose collectives run through NCCL on GPU buffers of one device: the
// same ranks as `host` (whose point-to-point and liveness it borrows for NCCL's bootstrap and
// for the peer watch while waiting), the NCCL communicator of (host, device) (nccl_comm.h).
// Each collective is enqueued on kolo's stream and waited for (polled; aborts on errors), so
// compositions written against Communicator, such as hierarchical_composition.h, run on the
// device unchanged. Allgatherv and Alltoallv take unequal parts (nccl_collectives.h:
// grouped ncclBroadcast, grouped ncclSend/ncclRecv); ReduceScatter needs equal parts on every
// rank (kUnimplemented otherwise: the runtime pads unequal ones itself, nccl_plan.h). NCCL has
// no int16, uint16 or bool reductions (kUnimplemented). The wait is on the calling thread (the
// runtime's background thread for nccl_hierarchical) on purpose: a composition needs each
// step's result before the next step, so only whole operations that are one stream-ordered
// enqueue (StreamOrderedAllreduce, broadcast) leave their wait to the runtime's finaliser.
#ifndef KOLO_COLLECTIVES_NCCL_NCCL_COMMUNICATOR_H_
#define KOLO_COLLECTIVES_NCCL_NCCL_COMMUNICATOR_H_

#include "collectives/communicator.h"

namespace kolo {

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(Communicator& host, int device) : host_(host), device_(device) {}

  int Rank() const override { return host_.Rank(); }
  int Size() const override { return host_.Size(); }
  std::string_view BackendName() const override { return "nccl"; }

  Status Allreduce(const void* send, void* recv, size_t count, DataType dtype,
                   ReduceOp op) override;
  Status ReduceScatter(const void* send, void* recv, const std::vector<size_t>& counts,
                       DataType dtype, ReduceOp op) override;
  Status Allgatherv(const void* send, size_t send_bytes, void* recv,
                    const std::vector<size_t>& recv_bytes) override;
  Status Alltoallv(const void* send, const std::vector<size_t>& send_bytes, void* recv,
                   const std::vector<size_t>& recv_bytes) override;
  Status Broadcast(void* buffer, size_t bytes, int root) override;
  Status CheckLiveness() override { return host_.CheckLiveness(); }

 private:
  Communicator& host_;
  int device_;
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_NCCL_NCCL_COMMUNICATOR_H_
