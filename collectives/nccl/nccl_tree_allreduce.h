// NCCL's tree all-reduce (Run calls ncclAllReduce: NCCL makes the final choice, KOLO_NCCL_ALGO=
// Tree forces it): a chain through the GPUs of each node and two
// complementary binary trees across the nodes (Sanders, Speck & Traeff 2009, the double binary
// tree; NCCL 2.4), each carrying half of the buffer.
//
// Steps: the data is pipelined in chunks up the chains and trees to the roots (reducing) and
// back down (broadcasting). A node is an inner vertex in at most one of the two trees, so each
// NIC carries about n bytes each way. Depth: ceil(log2 N) nodes plus the L-1 GPUs of a chain.
//
// Cost: T = c_nccl + 2 (ceil(log2 N) alpha_net + (L-1) alpha_gpu) + 2 n beta, with beta the
// slower of device_intra and the node's NICs together (device_inter / L: a channel per NIC,
// as for the ring). Up and down are overlapped in NCCL, yet nccl-tests
// show the tree at about the ring's bus bandwidth for large buffers, hence the 2 n. Only
// across nodes: inside one node NCCL runs the chain, which is the ring's latency without its
// bandwidth, so the ring is the candidate there.
#ifndef KOLO_COLLECTIVES_NCCL_NCCL_TREE_ALLREDUCE_H_
#define KOLO_COLLECTIVES_NCCL_NCCL_TREE_ALLREDUCE_H_

#include "collectives/algorithm.h"

namespace kolo {

class NcclTreeAllreduce : public AllreduceAlgorithm, public StreamOrderedAllreduce {
 public:
  std::string_view Name() const override { return "nccl_tree"; }
  MemoryKind memory() const override { return MemoryKind::kCuda; }
  Status Supports(const SelectionInput& in) const override;
  double EstimateMicros(const SelectionInput& in) const override;
  Status Run(Communicator& comm, const AllreduceArgs& args) override;
  Status Enqueue(Communicator& comm, const AllreduceArgs& args) override;
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_NCCL_NCCL_TREE_ALLREDUCE_H_
