#include "collectives/nccl/nccl_ring_allreduce.h"

#include <algorithm>

#include "collectives/nccl/nccl_cost.h"

namespace kolo {

Status NcclRingAllreduce::Supports(const SelectionInput& in) const {
  return SupportsNcclInput(in, Name());
}

double NcclRingAllreduce::EstimateMicros(const SelectionInput& in) const {
  const int p = std::max(1, in.ranks);
  if (p == 1) return kNcclCallUs;
  const LinkCost& intra = in.cost->device_intra;
  const LinkCost& link = DeviceFlatLink(in);
  // Across nodes a step waits for the slower of the NIC and the GPU links.
  const double beta = std::max(link.beta_us, intra.beta_us);
  const double chunk = static_cast<double>(in.bytes) / p;
  return kNcclCallUs + 2.0 * (p - 1) * (link.alpha_us + chunk * beta);
}

Status NcclRingAllreduce::Run(Communicator&, const AllreduceArgs&) { return NcclNotBuilt(Name()); }

}  // namespace kolo
