// What the selector would choose for a job shape, message size by message size: kolo-topo's
// decision table. Every algorithm in the table is ranked by its cost formula for a float32 sum
// of `bytes` over `nodes` x `ranks_per_node` ranks with the node structure in place (shared
// memory and the local/cross communicators available), host and device buffers alike.
#ifndef KOLO_COLLECTIVES_SELECT_DECISION_TABLE_H_
#define KOLO_COLLECTIVES_SELECT_DECISION_TABLE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "collectives/algorithm.h"
#include "collectives/select/cost_model.h"

namespace kolo {

struct Decision {
  size_t bytes = 0;
  MemoryKind memory = MemoryKind::kHost;
  std::string best;        // "" when no algorithm supports the input
  double best_us = 0;
  double busbw_gbps = 0;   // bytes / time x 2(p-1)/p (nccl-tests' all-reduce bus bandwidth)
  std::string runner_up;   // "" when only one candidate
  double runner_up_us = 0;
};

// How many ranks on how many nodes; nodes may hold different numbers of ranks.
struct JobShape {
  int nodes = 1;
  int ranks = 1;
  int max_local = 1;
  int min_local = 1;
  static JobShape Uniform(int nodes, int ranks_per_node);
  // "4 nodes x 8 ranks" or "2 nodes, 3 ranks (1 to 2 per node)".
  std::string Describe() const;
};

// 8 B, 64 B, ... x8 ... 1 GiB.
std::vector<size_t> DecisionSizes();

// The selection input of a float32 sum of `bytes` on that job shape.
SelectionInput JobSelectionInput(size_t bytes, const JobShape& shape, MemoryKind memory);
SelectionInput JobSelectionInput(size_t bytes, int nodes, int ranks_per_node, MemoryKind memory);

std::vector<Decision> MakeDecisionTable(const CostModel& cost, const JobShape& shape,
                                        MemoryKind memory, const std::vector<size_t>& sizes);
std::vector<Decision> MakeDecisionTable(const CostModel& cost, int nodes, int ranks_per_node,
                                        MemoryKind memory, const std::vector<size_t>& sizes);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_SELECT_DECISION_TABLE_H_
