// The cost model a job's topology implies: the link model's bottlenecks (topology/link_model.h)
// as the CostModel's links. Pure function, so every rank that received the same node
// topologies builds the same model; a tuning file read over it (CostModel::Load(path, base))
// replaces whatever it measured.
#ifndef KOLO_COLLECTIVES_SELECT_TOPOLOGY_COST_H_
#define KOLO_COLLECTIVES_SELECT_TOPOLOGY_COST_H_

#include "collectives/select/cost_model.h"
#include "topology/link_model.h"

namespace kolo {

// alpha from the link, beta = 1 / (GB/s x 1000) us per byte. intra from the slowest host pair
// of local ranks; inter from the slowest rank's NIC share and inter_sharing from the most ranks
// on one NIC, on real multi-node jobs only (simulated nodes keep base's); device_intra from the
// GPU links when every node has a GPU, device_inter from the GPUs' NIC shares on real
// multi-node jobs of such nodes; cache_bytes from the smallest node's last-level cache.
// Everything else (reduction and copy rates, barrier) stays base's.
CostModel CostModelFromLinks(const LinkModel& links, const CostModel& base = CostModel());

// beta (us per byte) of a link of `gbps` GB/s.
inline double BetaOfGbps(double gbps) { return gbps > 0 ? 1.0 / (gbps * 1000.0) : 0.0; }

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_SELECT_TOPOLOGY_COST_H_
