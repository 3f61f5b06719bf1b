// Hierarchical all-reduce with NCCL inside the nodes (Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE;
// Jia et al. 2018, "Highly scalable deep learning training system with mixed-precision", sec.
// 3.3): three phases over the local (GPUs of a node) and cross (same local rank on every node)
// communicators.
//
// Steps, L GPUs per node, N nodes, n bytes:
//   1. reduce-scatter inside the node (NCCL ring over NVLink/PCIe): local rank l holds the
//      node's sum of slice l (n/L bytes);                  (L-1) steps of n/L bytes
//   2. all-reduce of slice l across the nodes among the N ranks with local rank l (NCCL or
//      MPI over the NIC; the L slices travel at once, one per GPU and its NIC);
//   3. all-gather inside the node;                          (L-1) steps of n/L bytes
// Every NIC carries n/L-sized traffic instead of the flat ring's n-sized traffic through the
// one NIC each ring edge crosses: this wins when the node's links are much faster than its
// NICs (NVSwitch nodes), and loses on its three start-ups for small buffers.
//
// Cost: T = 3 c_nccl + 2 (L-1) (alpha_gpu + (n/L) beta_gpu)
//           + min(ring: 2 (N-1) (alpha_net + (n/(L N)) beta_net),
//                 tree: 2 ceil(log2 N) alpha_net + 2 (n/L) beta_net).
#ifndef KOLO_COLLECTIVES_NCCL_NCCL_HIERARCHICAL_ALLREDUCE_H_
#define KOLO_COLLECTIVES_NCCL_NCCL_HIERARCHICAL_ALLREDUCE_H_

#include "collectives/algorithm.h"

namespace kolo {

class NcclHierarchicalAllreduce : public AllreduceAlgorithm {
 public:
  std::string_view Name() const override { return "nccl_hierarchical"; }
  MemoryKind memory() const override { return MemoryKind::kCuda; }
  Status Supports(const SelectionInput& in) const override;
  double EstimateMicros(const SelectionInput& in) const override;
  Status Run(Communicator& comm, const AllreduceArgs& args) override;
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_NCCL_NCCL_HIERARCHICAL_ALLREDUCE_H_
