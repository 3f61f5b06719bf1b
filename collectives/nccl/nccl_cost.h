// What the NCCL algorithms share: the check that the input is in GPU memory, and the fixed
// cost of one NCCL collective (a kernel launch and its start-up, NCCL's baseLat).
#ifndef KOLO_COLLECTIVES_NCCL_NCCL_COST_H_
#define KOLO_COLLECTIVES_NCCL_NCCL_COST_H_

#include <algorithm>
#include <cmath>
#include <string>

#include "base/ceil_log2.h"
#include "collectives/algorithm.h"
#include "collectives/nccl/nccl_supports.h"

namespace kolo {

// ~6.6 us: NCCL's base latency of a ring all-reduce (src/graph/tuning.cc, baseLat).
constexpr double kNcclCallUs = 6.6;

inline Status SupportsNcclInput(const SelectionInput& in, std::string_view name) {
  if (in.memory != MemoryKind::kCuda) {
    return UnimplementedError(std::string(name) + " runs on CUDA device buffers");
  }
  const std::string why = NcclSupports(in.dtype, in.op);
  return why.empty() ? Status::OK() : UnimplementedError(why);
}

// Per byte of one step of NCCL's flat ring or tree: inside a node the GPU link; across nodes
// the slower of the GPU link and the node's NICs together. NCCL runs one channel per NIC
// (rail), so a ring's node-crossing edges use every NIC of the node at once: device_inter is
// one GPU's share of its NIC, and the node's GPUs' shares add up to its NICs' bandwidth.
inline double DeviceFlatBeta(const SelectionInput& in) {
  if (in.nodes <= 1) return in.cost->device_intra.beta_us;
  const double rails = in.cost->device_inter.beta_us / std::max(1, in.max_local_size);
  return std::max(in.cost->device_intra.beta_us, rails);
}
// Start-up of one such step: the NIC's across nodes.
inline double DeviceFlatAlpha(const SelectionInput& in) {
  return in.nodes > 1 ? in.cost->device_inter.alpha_us : in.cost->device_intra.alpha_us;
}

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_NCCL_NCCL_COST_H_
