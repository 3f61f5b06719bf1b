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

namespace {

// The formula (see the header) for in.bytes.
double FormulaMicros(const SelectionInput& in) {
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

bool SameLayout(const MeasuredAllreduce& m, const SelectionInput& in) {
  return m.ranks > 0 && m.ranks == in.ranks && m.nodes == in.nodes &&
         m.local_size == in.max_local_size && m.local_size == in.min_local_size;
}

}  // namespace

double NativeAllreduce::EstimateMicros(const SelectionInput& in) const {
  const double formula = FormulaMicros(in);
  const MeasuredAllreduce& m = in.cost->library_allreduce;
  if (!SameLayout(m, in) || formula <= 0 || in.bytes == 0) return formula;
  // measured / formula at each measured size, interpolated linearly in log(bytes) between the
  // two around in.bytes; beyond the measured sizes, the nearest one's.
  const auto ratio = [&](size_t i) {
    SelectionInput at = in;
    at.bytes = static_cast<size_t>(m.bytes[i]);
    const double f = FormulaMicros(at);
    return f > 0 ? m.micros[i] / f : 1.0;
  };
  const double x = static_cast<double>(in.bytes);
  const size_t last = m.bytes.size() - 1;
  if (x <= m.bytes[0]) return formula * ratio(0);
  if (x >= m.bytes[last]) return formula * ratio(last);
  size_t hi = 1;
  while (m.bytes[hi] < x) ++hi;
  const double t = std::log(x / m.bytes[hi - 1]) / std::log(m.bytes[hi] / m.bytes[hi - 1]);
  return formula * ((1 - t) * ratio(hi - 1) + t * ratio(hi));
}

Status NativeAllreduce::Run(Communicator& comm, const AllreduceArgs& args) {
  return comm.Allreduce(args.send, args.recv, args.count, args.dtype, args.op);
}

}  // namespace kolo
