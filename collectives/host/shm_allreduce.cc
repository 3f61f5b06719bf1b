#include "collectives/host/shm_allreduce.h"

#include <cmath>

#include "collectives/host/flat_common.h"
#include "collectives/host/node_pieces.h"
#include "collectives/node_context.h"
#include "collectives/reduce.h"

namespace kolo {

Status ShmAllreduce::Supports(const SelectionInput& in) const {
  KOLO_RETURN_IF_ERROR(internal::SupportsKernelOp(Name(), in));
  if (in.nodes != 1) {
    return UnimplementedError("needs one node, the ranks span " + std::to_string(in.nodes));
  }
  if (!in.shm_capable) {
    return UnimplementedError(in.has_node_context
                                  ? "the node's ranks cannot share memory"
                                  : "no node context (nobody probed for shared memory)");
  }
  return Status::OK();
}

double ShmAllreduce::EstimateMicros(const SelectionInput& in) const {
  const CostModel& c = *in.cost;
  const double p = std::max(1, in.ranks);
  const double n = static_cast<double>(in.bytes);
  if (p == 1) return n * c.copy_us;
  if (in.bytes <= reducer_.SmallBytesFor(in.ranks)) {
    return c.sync_us + 2 * n * c.copy_us + (p - 1) * n * c.gamma_us;
  }
  const double pieces = std::ceil(n / static_cast<double>(reducer_.piece_bytes()));
  // Input read and output written once each: one memcpy's worth of traffic that reaches memory
  // when the node's p inputs and outputs outgrow the cache; the slots and results stay cached.
  return n * c.CopyUs(2 * p * n) + n * c.copy_us + (p - 1) / p * n * c.gamma_us +
         2 * pieces * c.sync_us;
}

Status ShmAllreduce::Run(Communicator& comm, const AllreduceArgs& args) {
  return ShmAllreduce::RunWithPostscale(comm, args, 1.0);  // not a subclass's
}

Status ShmAllreduce::RunWithPostscale(Communicator& comm, const AllreduceArgs& args,
                                      double postscale) {
  if (comm.Size() == 1) {
    return ScaleCopy(args.recv, args.send, args.count, args.dtype, postscale);
  }
  NodeContext* node = comm.node();
  if (!node || !node->local || node->local->Size() != comm.Size()) {
    return FailedPreconditionError("shm all-reduce: the communicator has no one-node context");
  }
  if (args.count * DataTypeSize(args.dtype) <= reducer_.SmallBytesFor(comm.Size())) {
    return reducer_.RunSmall(*node->local, args, postscale);
  }
  return reducer_.Run(*node->local, args, node->local->Size(), nullptr, postscale);
}

Status ShmAllreduce::RunList(Communicator& comm, const std::vector<AllreducePart>& parts,
                             DataType dtype, ReduceOp op, double postscale) {
  if (!RunsLists(dtype)) return AllreduceAlgorithm::RunList(comm, parts, dtype, op, postscale);
  if (postscale != 1.0 && !CanRunScaled(dtype)) {
    return UnimplementedError("shm cannot scale a " + std::string(DataTypeName(dtype)) + " result");
  }
  if (comm.Size() == 1) {
    for (const AllreducePart& p : parts) {
      KOLO_RETURN_IF_ERROR(ScaleCopy(p.recv, p.send, p.count, dtype, postscale));
    }
    return Status::OK();
  }
  NodeContext* node = comm.node();
  if (!node || !node->local || node->local->Size() != comm.Size()) {
    return FailedPreconditionError("shm all-reduce: the communicator has no one-node context");
  }
  size_t count = 0;
  for (const AllreducePart& p : parts) count += p.count;
  if (count * DataTypeSize(dtype) <= reducer_.SmallBytesFor(comm.Size())) {
    return reducer_.RunSmallParts(*node->local, parts.data(), parts.size(), dtype, op, postscale);
  }
  return reducer_.RunParts(*node->local, parts.data(), parts.size(), dtype, op, node->local->Size(),
                           nullptr, postscale);
}

}  // namespace kolo
