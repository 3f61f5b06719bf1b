#include "collectives/nccl/nccl_tree_allreduce.h"

#include <algorithm>

#include "collectives/nccl/nccl_cost.h"
#include "collectives/nccl/nccl_run.h"

namespace kolo {

Status NcclTreeAllreduce::Supports(const SelectionInput& in) const {
  KOLO_RETURN_IF_ERROR(SupportsNcclInput(in, Name()));
  if (in.nodes < 2) return UnimplementedError("NCCL's trees span nodes; one node runs a chain");
  return Status::OK();
}

double NcclTreeAllreduce::EstimateMicros(const SelectionInput& in) const {
  const LinkCost& net = in.cost->device_inter;
  const LinkCost& gpu = in.cost->device_intra;
  const double beta = DeviceFlatBeta(in);
  const double depth = CeilLog2(in.nodes) * net.alpha_us + (in.max_local_size - 1) * gpu.alpha_us;
  return kNcclCallUs + 2.0 * depth + 2.0 * static_cast<double>(in.bytes) * beta;
}

Status NcclTreeAllreduce::Run(Communicator& comm, const AllreduceArgs& args) {
  return RunNcclAllreduce(comm, args);
}

Status NcclTreeAllreduce::Enqueue(Communicator& comm, const AllreduceArgs& args) {
  return EnqueueNcclAllreduce(comm, args);
}

}  // namespace kolo
