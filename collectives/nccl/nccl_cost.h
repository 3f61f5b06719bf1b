// What the NCCL algorithms share: the check that the input is in GPU memory, and the fixed
// cost of one NCCL collective (a kernel launch and its start-up, NCCL's baseLat).
#ifndef KOLO_COLLECTIVES_NCCL_NCCL_COST_H_
#define KOLO_COLLECTIVES_NCCL_NCCL_COST_H_

#include <cmath>
#include <string>

#include "collectives/algorithm.h"

namespace kolo {

// ~6.6 us: NCCL's base latency of a ring all-reduce (src/graph/tuning.cc, baseLat).
constexpr double kNcclCallUs = 6.6;

inline Status SupportsNcclInput(const SelectionInput& in, std::string_view name) {
  if (in.memory != MemoryKind::kCuda) {
    return UnimplementedError(std::string(name) + " runs on CUDA device buffers");
  }
  if (in.op != ReduceOp::kSum && in.op != ReduceOp::kMin && in.op != ReduceOp::kMax &&
      in.op != ReduceOp::kProduct) {
    return UnimplementedError("NCCL has no such reduction");
  }
  return Status::OK();
}

// Which link bounds a step that spans nodes or stays inside one.
inline const LinkCost& DeviceFlatLink(const SelectionInput& in) {
  return in.nodes > 1 ? in.cost->device_inter : in.cost->device_intra;
}

inline double CeilLog2(int n) { return n <= 1 ? 0.0 : std::ceil(std::log2(n)); }

// kolo's NCCL path is issue 7's; until it lands the NCCL algorithms are ranked (kolo-topo's
// decision table, the selector for device buffers) but cannot run.
inline Status NcclNotBuilt(std::string_view name) {
  return UnimplementedError(std::string(name) +
                            ": kolo's NCCL path is not in this build yet (device buffers cannot "
                            "be submitted); it is ranked by the cost model only");
}

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_NCCL_NCCL_COST_H_
