#include "collectives/nccl/nccl_hierarchical_allreduce.h"

#include <algorithm>

#include "collectives/nccl/nccl_cost.h"
#include "collectives/nccl/nccl_run.h"

namespace kolo {

Status NcclHierarchicalAllreduce::Supports(const SelectionInput& in) const {
  KOLO_RETURN_IF_ERROR(SupportsNcclInput(in, Name()));
  if (in.nodes < 2) return UnimplementedError("one node: nothing to do across nodes");
  if (in.max_local_size < 2) return UnimplementedError("one GPU per node: nothing to do inside");
  if (in.max_local_size != in.min_local_size) {
    return UnimplementedError("nodes with different GPU counts (the slices would not line up)");
  }
  if (in.count % static_cast<size_t>(in.max_local_size) != 0) {
    return UnimplementedError(std::to_string(in.count) + " elements do not divide among " +
                              std::to_string(in.max_local_size) + " GPUs per node");
  }
  return Status::OK();
}

double NcclHierarchicalAllreduce::EstimateMicros(const SelectionInput& in) const {
  const LinkCost& gpu = in.cost->device_intra;
  const LinkCost& net = in.cost->device_inter;
  const int local = std::max(1, in.max_local_size);
  const int nodes = std::max(1, in.nodes);
  const double slice = static_cast<double>(in.bytes) / local;
  const double inside = 2.0 * (local - 1) * (gpu.alpha_us + slice * gpu.beta_us);
  const double ring = 2.0 * (nodes - 1) * (net.alpha_us + slice / nodes * net.beta_us);
  const double tree = 2.0 * CeilLog2(nodes) * net.alpha_us + 2.0 * slice * net.beta_us;
  return 3 * kNcclCallUs + inside + std::min(ring, tree);
}

Status NcclHierarchicalAllreduce::Run(Communicator& comm, const AllreduceArgs& args) {
  return RunNcclHierarchicalAllreduce(comm, args);
}

}  // namespace kolo
