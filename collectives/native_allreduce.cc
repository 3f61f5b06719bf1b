#include "collectives/native_allreduce.h"

#include <cmath>

namespace kolo {
namespace {
// Defaults for one node over shared memory (MACHINE-NOTES.md 3-4): ~1 us latency, ~5 GB/s.
constexpr double kAlphaMicros = 1.0;
constexpr double kBetaMicrosPerByte = 1.0 / 5000.0;
constexpr double kGammaMicrosPerByte = 1.0 / 11000.0;
}  // namespace

Status NativeAllreduce::Supports(const SelectionInput& in) const {
  if (in.op == ReduceOp::kAverage || in.op == ReduceOp::kAdasum) {
    return UnimplementedError("mpi: " + std::string(ReduceOpName(in.op)) +
                              " is not a library reduction");
  }
  return Status::OK();
}

double NativeAllreduce::EstimateMicros(const SelectionInput& in) const {
  const double p = std::max(1, in.ranks);
  if (p == 1) return 0;
  const double n = static_cast<double>(in.bytes);
  return 2 * std::log2(p) * kAlphaMicros +
         2 * (p - 1) / p * n * (kBetaMicrosPerByte + kGammaMicrosPerByte / 2);
}

Status NativeAllreduce::Run(Communicator& comm, const AllreduceArgs& args) {
  return comm.Allreduce(args.send, args.recv, args.count, args.dtype, args.op);
}

}  // namespace kolo
