// NCCL's all-reduce over every rank's GPU: one ncclAllReduce, in which NCCL picks its own
// algorithm (ring or tree; NVLS and CollNet where the hardware has them) per call. NCCL takes
// an outside choice only from NCCL_ALGO in the environment when it makes its first
// communicator (which kolo never sets), so this is one
// entry: forcing it forces NCCL, and NCCL_ALGO forces NCCL's algorithm. The estimate predicts
// what NCCL will run: the algorithm NCCL_ALGO leaves it (`NcclAllreduceAlgorithm`), else the
// cheaper of the two below, as NCCL's own tuner picks by the same kind of model.
//
// Ring (Patarasuk & Yuan 2009): the buffer is cut into p chunks; in p-1 reduce-scatter steps
// rank r sends chunk (r - s) mod p to r+1 and adds the one it receives from r-1; in p-1
// all-gather steps the reduced chunks travel on. Every step moves n/p bytes over every ring
// edge at once, so a step takes as long as the slowest edge: inside one node the GPU-to-GPU
// link (NVLink or PCIe), on several nodes the NICs the ring crosses. NCCL runs one ring channel
// per NIC, so the node-crossing edges together use all of a node's NICs.
//   T_ring = c + 2(p-1) (alpha + (n/p) beta); one node: (alpha, beta) = device_intra; several:
//   alpha = device_inter's, beta = max(device_intra, device_inter / L) (L GPUs per node, whose
//   NIC shares add up to the node's NICs).
//
// Tree (Sanders, Speck & Traeff 2009, the double binary tree; NCCL 2.4): a chain through the
// GPUs of each node and two complementary binary trees across the nodes, each carrying half of
// the buffer, pipelined up (reducing) and down (broadcasting). A node is an inner vertex in at
// most one of the two trees, so each NIC carries about n bytes each way.
//   T_tree = c + 2 (ceil(log2 N) alpha_net + (L-1) alpha_gpu) + 2 n beta (beta as the ring's).
//   Up and down overlap in NCCL, yet nccl-tests show the tree at about the ring's bus
//   bandwidth for large buffers, hence the 2 n. Only across nodes: inside one node NCCL runs
//   the chain, the ring's latency without its bandwidth, so one node predicts the ring.
//
// c = 6.6 us is NCCL's start-up (nccl_cost.h). The GPU's reduction runs at HBM speed and is not
// charged.
#ifndef KOLO_COLLECTIVES_NCCL_NCCL_ALLREDUCE_H_
#define KOLO_COLLECTIVES_NCCL_NCCL_ALLREDUCE_H_

#include <string_view>

#include "collectives/algorithm.h"

namespace kolo {

// Which of its all-reduce algorithms NCCL may run, as far as the estimate tells them apart.
enum class NcclAllreduceAlgorithm {
  kEither,  // NCCL's tuner picks (NCCL_ALGO unset, or allowing both or neither of the two)
  kRing,
  kTree,
};

// What NCCL_ALGO's value leaves NCCL's all-reduce, read as NCCL reads it (case-insensitive): a
// list of algorithms ("Ring", "Tree,Ring"), a list to exclude ("^Tree"), or sections
// ("ring;allreduce:tree;allgather:ring": a first one without a name for every collective, then
// per collective), of which the all-reduce's counts.
NcclAllreduceAlgorithm ParseNcclAlgo(std::string_view nccl_algo);

// How NCCL multiplies a sum by a postscale in the reduction itself: ncclAvg when the postscale
// is 1/ranks (Average; every floating dtype), an ncclRedOpCreatePreMulSum operator with the
// postscale for float32 and float64 (each rank's input times the factor, then the sum: equal in
// exact arithmetic, rounded differently by at most an ulp or so), or not at all: integers
// truncate after the sum, and float16/bfloat16 would need the factor in their own type, which
// rounds it (the caller then scales in a pass of its own, in float32). Not at all at one rank
// either (NCCL's one-rank kernel got float32 PreMulSum wrong: nccl_allreduce.cc).
enum class NcclPostscale { kNone, kAverage, kPreMulSum };
NcclPostscale NcclPostscaleFor(DataType dtype, double postscale, int ranks);

class NcclAllreduce : public AllreduceAlgorithm, public StreamOrderedAllreduce {
 public:
  explicit NcclAllreduce(NcclAllreduceAlgorithm algorithm = NcclAllreduceAlgorithm::kEither)
      : algorithm_(algorithm) {}
  std::string_view Name() const override { return "nccl"; }
  MemoryKind memory() const override { return MemoryKind::kCuda; }
  Status Supports(const SelectionInput& in) const override;
  double EstimateMicros(const SelectionInput& in) const override;
  Status Run(Communicator& comm, const AllreduceArgs& args) override;
  Status Enqueue(Communicator& comm, const AllreduceArgs& args) override;
  bool FoldsPostscale(DataType dtype, double postscale, int ranks) const override;
  Status EnqueueScaled(Communicator& comm, const AllreduceArgs& args, double postscale) override;

  // The two formulas above, for the estimate and its tests; the tree is negative (not run) on
  // one node.
  static double RingMicros(const SelectionInput& in);
  static double TreeMicros(const SelectionInput& in);

 private:
  NcclAllreduceAlgorithm algorithm_;
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_NCCL_NCCL_ALLREDUCE_H_
