// What kolo-topo prints: the topology of each node (packages, GPUs with bus ids, a GPU/NIC
// matrix in the style of `nvidia-smi topo -m`, NICs and their closest GPUs, the loader's
// notes), the link model, the cost model and the decision table; as text or as JSON.
#ifndef KOLO_TOPOLOGY_TOOL_REPORT_H_
#define KOLO_TOPOLOGY_TOOL_REPORT_H_

#include <string>
#include <vector>

#include "collectives/select/cost_model.h"
#include "collectives/select/decision_table.h"
#include "topology/link_model.h"

namespace kolo::topo_tool {

struct Report {
  JobLayout job;               // the nodes' topologies and where ranks are
  JobShape shape;              // job shape of the decision table
  bool shape_given = false;    // --nodes/--ranks-per-node, not the running job
  LinkModel links;
  CostModel cost;
  std::vector<Decision> host;
  std::vector<Decision> device;  // empty: no GPU on some node
};

std::string TextReport(const Report& r);
std::string JsonReport(const Report& r);

// "8 B", "64 KiB", "1 GiB".
std::string HumanBytes(size_t bytes);

}  // namespace kolo::topo_tool

#endif  // KOLO_TOPOLOGY_TOOL_REPORT_H_
