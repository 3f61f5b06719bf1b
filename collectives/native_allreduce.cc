#include "collectives/native_allreduce.h"

#include <cmath>

namespace kolo {
Status NativeAllreduce::Supports(const SelectionInput& in) const {
  if (in.op == ReduceOp::kAverage || in.op == ReduceOp::kAdasum) {
    return UnimplementedError(std::string(ReduceOpName(in.op)) +
                              " is not a library reduction");
  }
  // UCX moves bytes only: it has no collectives, so its communicator has no native all-reduce
  // and the selection moves on to kolo's own algorithms.
  if (in.backend == "ucx") return UnimplementedError("the ucx backend has no native all-reduce");
  return Status::OK();
}

double NativeAllreduce::EstimateMicros(const SelectionInput& in) const {
  const double p = std::max(1, in.ranks);
  if (p == 1) return 0;
  const double n = static_cast<double>(in.bytes);
  const LinkCost& link = FlatLink(in);
  return 2 * std::log2(p) * link.alpha_us +
         2 * (p - 1) / p * n * (link.beta_us + in.cost->gamma_us / 2);
}

Status NativeAllreduce::Run(Communicator& comm, const AllreduceArgs& args) {
  return comm.Allreduce(args.send, args.recv, args.count, args.dtype, args.op);
}

}  // namespace kolo
