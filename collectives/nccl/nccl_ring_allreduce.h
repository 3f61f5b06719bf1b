// NCCL's ring all-reduce over every rank's GPU. Run calls ncclAllReduce, where NCCL makes the
// final choice of ring or tree (KOLO_NCCL_ALGO=Ring forces it, as NCCL_ALGO): the name is what
// the cost model expects NCCL to run.
//
// Steps (Patarasuk & Yuan 2009; NCCL's ring): the buffer is cut into p chunks; in p-1
// reduce-scatter steps rank r sends chunk (r - s) mod p to r+1 and adds the one it receives
// from r-1; in p-1 all-gather steps the reduced chunks travel on. Every step moves n/p bytes
// over every ring edge at once, so a step takes as long as the slowest edge: inside one node
// the GPU-to-GPU link (NVLink or PCIe), on several nodes the NICs the ring crosses. NCCL runs
// one ring channel per NIC, so the node-crossing edges together use all of a node's NICs.
//
// Cost: T = c_nccl + 2(p-1) (alpha + (n/p) beta); one node: (alpha, beta) = device_intra;
// several: alpha = device_inter's, beta = max(device_intra, device_inter / L) (L GPUs per node,
// whose NIC shares add up to the node's NICs); c_nccl is NCCL's start-up (nccl_cost.h). The
// GPU's reduction runs at HBM speed and is not charged.
#ifndef KOLO_COLLECTIVES_NCCL_NCCL_RING_ALLREDUCE_H_
#define KOLO_COLLECTIVES_NCCL_NCCL_RING_ALLREDUCE_H_

#include "collectives/algorithm.h"

namespace kolo {

class NcclRingAllreduce : public AllreduceAlgorithm, public StreamOrderedAllreduce {
 public:
  std::string_view Name() const override { return "nccl_ring"; }
  MemoryKind memory() const override { return MemoryKind::kCuda; }
  Status Supports(const SelectionInput& in) const override;
  double EstimateMicros(const SelectionInput& in) const override;
  Status Run(Communicator& comm, const AllreduceArgs& args) override;
  Status Enqueue(Communicator& comm, const AllreduceArgs& args) override;
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_NCCL_NCCL_RING_ALLREDUCE_H_
