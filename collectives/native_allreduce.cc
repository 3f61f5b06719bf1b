#include "collectives/native_allreduce.h"

#include <cmath>

#include "collectives/host/flat_common.h"

namespace kolo {
Status NativeAllreduce::Supports(const SelectionInput& in) const {
  if (in.op == ReduceOp::kAverage || in.op == ReduceOp::kAdasum) {
    return UnimplementedError(std::string(ReduceOpName(in.op)) +
                              " is not a library reduction");
  }
  // A transport that moves bytes only (UCX) has no collectives: the selection moves on to
  // kolo's own algorithms.
  if (!in.native_collectives) {
    return UnimplementedError("the " + std::string(in.backend) +
                              " backend has no native all-reduce");
  }
  return Status::OK();
}

double NativeAllreduce::EstimateMicros(const SelectionInput& in) const {
  const double p = std::max(1, in.ranks);
  if (p == 1) return 0;
  const double n = static_cast<double>(in.bytes);
  const int ranks = static_cast<int>(p);
  if ((ranks & (ranks - 1)) == 0) {
    // Recursive halving and doubling, nearest partner first, as Open MPI's all-reduce moves
    // about the bytes of (docs/benchmarks.md, "Across nodes": about S per node at 2 x 2).
    return internal::HalvingDoublingMicros(in, ranks);
  }
  const LinkCost& link = FlatLink(in);
  return 2 * std::log2(p) * link.alpha_us +
         2 * (p - 1) / p * n * (link.beta_us + in.cost->gamma_us / 2);
}

Status NativeAllreduce::Run(Communicator& comm, const AllreduceArgs& args) {
  return comm.Allreduce(args.send, args.recv, args.count, args.dtype, args.op);
}

}  // namespace kolo
