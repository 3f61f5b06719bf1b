#include "collectives/select/topology_cost.h"

namespace kolo {

namespace {
LinkCost CostOf(const Link& l) { return {l.alpha_us, BetaOfGbps(l.gbps)}; }
}  // namespace

CostModel CostModelFromLinks(const LinkModel& links, const CostModel& base) {
  CostModel m = base;
  if (links.intra_host.gbps > 0) m.intra = CostOf(links.intra_host);
  if (links.multi_node && links.inter_host.gbps > 0) {
    m.inter = CostOf(links.inter_host);
    m.inter_sharing = links.nic_sharers;
  }
  if (links.gpus) {
    if (links.intra_device.gbps > 0) m.device_intra = CostOf(links.intra_device);
    if (links.multi_node && links.inter_device.gbps > 0) {
      m.device_inter = CostOf(links.inter_device);
    }
  }
  if (links.cache_bytes > 0) m.cache_bytes = links.cache_bytes;
  m.source = "topology (hwloc)";
  return m;
}

}  // namespace kolo
