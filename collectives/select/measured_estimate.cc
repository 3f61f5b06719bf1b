#include "collectives/select/measured_estimate.h"

#include <cmath>

namespace kolo {

bool MeasuredOnLayout(const MeasuredAllreduce& m, const SelectionInput& in) {
  return m.ranks > 0 && in.memory == MemoryKind::kHost && m.backend == in.backend &&
         m.ranks == in.ranks && m.nodes == in.nodes && m.local_size == in.max_local_size &&
         m.local_size == in.min_local_size;
}

double MeasuredEstimate(const AllreduceAlgorithm& algo, const SelectionInput& in) {
  const double formula = algo.EstimateMicros(in);
  const MeasuredAllreduce& m = in.cost->measured_allreduce;
  if (formula <= 0 || in.bytes == 0 || !MeasuredOnLayout(m, in)) return formula;
  auto times = m.micros.find(algo.Name());  // no allocation: the executor selects per response
  if (times == m.micros.end()) return formula;
  const auto ratio = [&](size_t i) {
    SelectionInput at = in;
    at.bytes = static_cast<size_t>(m.bytes[i]);
    at.count = at.bytes / DataTypeSize(in.dtype);
    const double f = algo.EstimateMicros(at);
    return f > 0 ? times->second[i] / f : 1.0;
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

}  // namespace kolo
