#include "collectives/nccl/nccl_ring_allreduce.h"

#include <algorithm>

#include "collectives/nccl/nccl_cost.h"
#include "collectives/nccl/nccl_run.h"

namespace kolo {

Status NcclRingAllreduce::Supports(const SelectionInput& in) const {
  return SupportsNcclInput(in, Name());
}

double NcclRingAllreduce::EstimateMicros(const SelectionInput& in) const {
  const int p = std::max(1, in.ranks);
  if (p == 1) return kNcclCallUs;
  const double chunk = static_cast<double>(in.bytes) / p;
  return kNcclCallUs + 2.0 * (p - 1) * (DeviceFlatAlpha(in) + chunk * DeviceFlatBeta(in));
}

Status NcclRingAllreduce::Run(Communicator& comm, const AllreduceArgs& args) {
  return RunNcclAllreduce(comm, args);
}

Status NcclRingAllreduce::Enqueue(Communicator& comm, const AllreduceArgs& args) {
  return EnqueueNcclAllreduce(comm, args);
}

}  // namespace kolo
