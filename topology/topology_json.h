// A Topology as JSON: what ranks exchange at kolo_init so every rank knows every node's, and
// what `kolo-topo --json` prints. Round-trips exactly (ToJson(FromJson(ToJson(t))) ==
// ToJson(t)), so ranks that build the link model from the same JSON agree bit for bit.
#ifndef KOLO_TOPOLOGY_TOPOLOGY_JSON_H_
#define KOLO_TOPOLOGY_TOPOLOGY_JSON_H_

#include <string>

#include "base/status.h"
#include "topology/topology.h"

namespace kolo {

// indent < 0: one line (for the wire); >= 0: pretty-printed.
std::string TopologyToJson(const Topology& topo, int indent = -1);
// kInvalidArgument naming `what` and the offending key on malformed input.
StatusOr<Topology> TopologyFromJson(const std::string& json, const std::string& what);

}  // namespace kolo

#endif  // KOLO_TOPOLOGY_TOPOLOGY_JSON_H_
