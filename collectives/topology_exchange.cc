#include "collectives/topology_exchange.h"

#include <set>

#include "topology/hwloc_topology.h"
#include "topology/topology_json.h"

namespace kolo {

namespace {
// What a node's lowest rank sends: one of these prefixes, then the JSON or the message.
constexpr const char kOk[] = "ok:";
constexpr const char kXmlError[] = "error:";   // KOLO_TOPOLOGY_XML unusable: fails kolo_init
constexpr const char kNoTopology[] = "none:";  // hwloc failed on the live machine: defaults

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }
}  // namespace

StatusOr<JobTopology> ExchangeTopologies(const GatherAll& gather_all, int rank,
                                         const NodeMap& map, const std::string& xml_path,
                                         bool grouping_set) {
  if (map.ranks() == 0 || rank >= map.ranks()) {
    return InvalidArgumentError("topology exchange: the node map does not cover rank " +
                                std::to_string(rank));
  }
  std::string mine;
  if (map.local_rank_of[rank] == 0) {
    StatusOr<Topology> topo = LoadTopology(xml_path);
    if (topo.ok()) {
      mine = kOk + TopologyToJson(*topo);
    } else {
      mine = (xml_path.empty() ? kNoTopology : kXmlError) + topo.status().message();
    }
  }
  std::vector<std::string> all;
  KOLO_RETURN_IF_ERROR(gather_all(mine, &all));

  JobTopology job;
  job.available = true;
  job.layout.node_of_rank = map.node_of_rank;
  job.layout.local_rank_of = map.local_rank_of;
  job.layout.nodes.resize(map.nodes());
  std::set<std::string> hosts;
  for (int r = 0; r < map.ranks(); ++r) {
    if (map.local_rank_of[r] != 0) continue;
    const int node = map.node_of_rank[r];
    const std::string where = "node " + std::to_string(node) + " (rank " + std::to_string(r) + ")";
    const std::string& s = all[r];
    if (StartsWith(s, kXmlError)) {
      return InvalidArgumentError("KOLO_TOPOLOGY_XML on " + where + ": " +
                                  s.substr(sizeof(kXmlError) - 1));
    }
    if (StartsWith(s, kNoTopology)) {
      job.available = false;
      job.why = where + ": " + s.substr(sizeof(kNoTopology) - 1);
      continue;
    }
    StatusOr<Topology> topo =
        TopologyFromJson(s.substr(sizeof(kOk) - 1), "the topology of " + where);
    if (!topo.ok()) return topo.status();
    hosts.insert(topo->hostname);
    job.layout.nodes[node] = std::move(*topo);
  }
  job.layout.simulated_nodes = grouping_set && hosts.size() <= 1 && map.nodes() > 1;
  return job;
}

}  // namespace kolo
