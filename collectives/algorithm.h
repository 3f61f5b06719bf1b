// An all-reduce algorithm: a small class with one entry point and the cost formula of the
// source it follows, so the Selector can rank it (docs/conventions.md "An algorithm").
#ifndef KOLO_COLLECTIVES_ALGORITHM_H_
#define KOLO_COLLECTIVES_ALGORITHM_H_

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "collectives/communicator.h"
#include "collectives/select/cost_model.h"

namespace kolo {

// Where a buffer lives. Host algorithms run on kHost only; the NCCL ones (collectives/nccl/)
// on kCuda only.
enum class MemoryKind : int { kHost = 0, kCuda = 1 };
std::string_view MemoryKindName(MemoryKind m);  // "host", "cuda"

// Facts every rank shares, so every rank picks the same algorithm without talking.
struct SelectionInput {
  size_t bytes = 0;  // message size on the wire
  size_t count = 0;  // elements
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  MemoryKind memory = MemoryKind::kHost;
  int ranks = 1;
  std::string_view backend;  // Communicator::BackendName()
  // Communicator::HasNativeCollectives(): false for a transport that only moves bytes (UCX),
  // where the library's all-reduce would be kolo's own algorithms under another name.
  bool native_collectives = true;
  // Node structure (Communicator::node(); one node of `ranks` when it has none).
  int nodes = 1;
  int max_local_size = 1;
  int min_local_size = 1;
  bool has_node_context = false;  // local/cross communicators exist (hierarchical can run)
  bool shm_capable = false;       // the node communicator can allocate shared memory
  // Never null once the selector fills it in.
  const CostModel* cost = nullptr;
};

// The facts of `comm` that selection needs (ranks, backend, node structure); the caller adds
// bytes, count, dtype, op; the selector adds the cost model.
SelectionInput DescribeCommunicator(const Communicator& comm);

// The link the slowest step of a flat (topology-blind) algorithm crosses.
inline const LinkCost& FlatLink(const SelectionInput& in) {
  return in.nodes > 1 ? in.cost->inter : in.cost->intra;
}

// The link of one step of recursive doubling or halving between rank r and r XOR distance. With
// ranks placed by node in nodes of one power-of-two size L, partners closer than L share a node:
// those steps stay inside it; the others cross with every rank of the node at once (inter).
inline const LinkCost& StepLink(const SelectionInput& in, int distance) {
  const int local = in.min_local_size;
  const bool aligned = in.max_local_size == local && local > 0 && (local & (local - 1)) == 0;
  if (in.nodes > 1 && !(aligned && distance < local)) return in.cost->inter;
  return in.cost->intra;
}

// The same for a ring over ranks placed by node (mpirun's and torchrun's default): one ring edge
// leaves each node, so the flow between nodes has the node's NIC to itself, while another
// enters the node through the same link (inter_duplex).
inline LinkCost RingLink(const SelectionInput& in) {
  if (in.nodes <= 1) return in.cost->intra;
  return {in.cost->inter.alpha_us, in.cost->inter.beta_us * std::max(1.0, in.cost->inter_duplex) /
                                       std::max(1.0, in.cost->inter_sharing)};
}

struct AllreduceArgs {
  const void* send = nullptr;  // == recv for in place
  void* recv = nullptr;
  size_t count = 0;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;  // kSum, kMin, kMax or kProduct
};

// One tensor of a list all-reduce (AllreduceAlgorithm::RunList).
struct AllreducePart {
  const void* send = nullptr;  // == recv for in place
  void* recv = nullptr;
  size_t count = 0;  // elements
};

class AllreduceAlgorithm {
 public:
  virtual ~AllreduceAlgorithm() = default;
  virtual std::string_view Name() const = 0;
  // The memory its buffers must be in; the selector offers it only inputs of that kind.
  virtual MemoryKind memory() const { return MemoryKind::kHost; }
  // OK, or kUnimplemented with the reason this algorithm cannot run this input.
  virtual Status Supports(const SelectionInput& in) const = 0;
  // Predicted time (alpha-beta-gamma model); the same on every rank for the same input.
  virtual double EstimateMicros(const SelectionInput& in) const = 0;
  virtual Status Run(Communicator& comm, const AllreduceArgs& args) = 0;

  // Whether RunScaled can multiply a result of `dtype` by a factor in the algorithm's own last
  // pass over it, saving the caller a pass of its own (Average's 1/size on a large tensor is a
  // read and a write of all of it): float32/float64 where the algorithm overrides
  // RunWithPostscale, which is its whole part of the contract.
  virtual bool CanRunScaled(DataType dtype) const {
    return ScalesInItsOwnPass() && IsFloatingPoint(dtype) && !IsHalf(dtype);
  }
  // Run, with the result (every rank's recv) multiplied by `postscale` as ScaleCopy would;
  // where CanRunScaled says so (kUnimplemented otherwise, unless postscale is 1). The same
  // answer on every rank, before anything is exchanged.
  Status RunScaled(Communicator& comm, const AllreduceArgs& args, double postscale) {
    if (postscale == 1.0) return Run(comm, args);
    if (!CanRunScaled(args.dtype)) {
      return UnimplementedError(std::string(Name()) + " cannot scale a " +
                                std::string(DataTypeName(args.dtype)) + " result");
    }
    return RunWithPostscale(comm, args, postscale);
  }

  // Whether RunList can all-reduce a list of `dtype` tensors straight in their own buffers, as
  // if they were one: a fused response then needs no fusion buffer, and so no packing and
  // unpacking passes over its tensors.
  virtual bool RunsLists(DataType dtype) const {
    (void)dtype;
    return false;
  }
  // The concatenation of `parts` all-reduced as Run of one buffer holding it would be (the same
  // bits), each part's result in its recv, multiplied by `postscale` where it is not 1 (only
  // where CanRunScaled too). Every rank passes the same counts, in the same order.
  virtual Status RunList(Communicator& comm, const std::vector<AllreducePart>& parts,
                         DataType dtype, ReduceOp op, double postscale) {
    (void)comm;
    (void)parts;
    (void)dtype;
    (void)op;
    (void)postscale;
    return UnimplementedError(std::string(Name()) + " cannot run a list of tensors");
  }

 protected:
  // Overridden together: an algorithm that scales in its own last pass says so and does it.
  virtual bool ScalesInItsOwnPass() const { return false; }
  virtual Status RunWithPostscale(Communicator& comm, const AllreduceArgs& args, double postscale) {
    (void)comm;
    (void)args;
    (void)postscale;
    return UnimplementedError(std::string(Name()) + " cannot scale its result");
  }
};

// An algorithm whose whole run is enqueued on a stream (kolo's stream of the buffers' device)
// with nothing for the host to wait for in between, such as one ncclAllReduce. Run enqueues and
// waits; Enqueue only enqueues, and the caller waits for the stream its own way (the runtime's
// finaliser, runtime/device/device_finaliser.h, so the background thread never blocks on the GPU).
// Algorithms that need the host between their steps (the hierarchical composition) do not
// offer it.
class StreamOrderedAllreduce {
 public:
  virtual ~StreamOrderedAllreduce() = default;
  virtual Status Enqueue(Communicator& comm, const AllreduceArgs& args) = 0;
  // Whether EnqueueScaled can multiply a kSum of `dtype` over `ranks` ranks by `postscale` in the
  // reduction itself, saving the caller a pass of its own over the result.
  virtual bool FoldsPostscale(DataType dtype, double postscale, int ranks) const {
    (void)dtype;
    (void)ranks;
    return postscale == 1.0;
  }
  // Enqueue of a kSum whose result comes out multiplied by `postscale`; only where
  // FoldsPostscale says so (kUnimplemented otherwise).
  virtual Status EnqueueScaled(Communicator& comm, const AllreduceArgs& args, double postscale) {
    if (postscale != 1.0) return UnimplementedError("this algorithm cannot fold a postscale");
    return Enqueue(comm, args);
  }
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_ALGORITHM_H_
