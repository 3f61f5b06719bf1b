#include "collectives/select/decision_table.h"

#include "collectives/select/registry.h"

namespace kolo {

std::vector<size_t> DecisionSizes() {
  std::vector<size_t> out;
  for (size_t b = 8; b <= (size_t{1} << 30); b *= 8) out.push_back(b);
  if (out.back() != (size_t{1} << 30)) out.push_back(size_t{1} << 30);
  return out;
}

JobShape JobShape::Uniform(int nodes, int ranks_per_node) {
  JobShape s;
  s.nodes = nodes;
  s.ranks = nodes * ranks_per_node;
  s.max_local = s.min_local = ranks_per_node;
  return s;
}

std::string JobShape::Describe() const {
  const std::string n = std::to_string(nodes) + (nodes == 1 ? " node" : " nodes");
  if (max_local == min_local) {
    return n + " x " + std::to_string(max_local) + (max_local == 1 ? " rank" : " ranks");
  }
  return n + ", " + std::to_string(ranks) + " ranks (" + std::to_string(min_local) + " to " +
         std::to_string(max_local) + " per node)";
}

SelectionInput JobSelectionInput(size_t bytes, const JobShape& shape, MemoryKind memory) {
  SelectionInput in;
  in.bytes = bytes;
  in.count = bytes / 4;
  in.dtype = DataType::kFloat32;
  in.op = ReduceOp::kSum;
  in.memory = memory;
  in.ranks = shape.ranks;
  in.backend = "mpi";
  in.nodes = shape.nodes;
  in.max_local_size = shape.max_local;
  in.min_local_size = shape.min_local;
  in.has_node_context = true;
  in.shm_capable = true;
  return in;
}

SelectionInput JobSelectionInput(size_t bytes, int nodes, int ranks_per_node, MemoryKind memory) {
  return JobSelectionInput(bytes, JobShape::Uniform(nodes, ranks_per_node), memory);
}

std::vector<Decision> MakeDecisionTable(const CostModel& cost, int nodes, int ranks_per_node,
                                        MemoryKind memory, const std::vector<size_t>& sizes) {
  return MakeDecisionTable(cost, JobShape::Uniform(nodes, ranks_per_node), memory, sizes);
}

std::vector<Decision> MakeDecisionTable(const CostModel& cost, const JobShape& shape,
                                        MemoryKind memory, const std::vector<size_t>& sizes) {
  AllreduceSelector selector("", cost);
  std::vector<Decision> out;
  const int p = shape.ranks;
  for (size_t bytes : sizes) {
    Decision d;
    d.bytes = bytes;
    d.memory = memory;
    const AllreduceAlgorithm* best = nullptr;
    const AllreduceAlgorithm* second = nullptr;
    double best_us = 0, second_us = 0;
    // Ties go to the earlier entry, as in Select.
    for (const auto& [algo, us] : selector.Rank(JobSelectionInput(bytes, shape, memory))) {
      if (us < 0) continue;
      if (!best || us < best_us) {
        second = best;
        second_us = best_us;
        best = algo;
        best_us = us;
      } else if (!second || us < second_us) {
        second = algo;
        second_us = us;
      }
    }
    if (best) {
      d.best = std::string(best->Name());
      d.best_us = best_us;
      const double factor = p > 1 ? 2.0 * (p - 1) / p : 0.0;
      d.busbw_gbps = best_us > 0 ? static_cast<double>(bytes) / (best_us * 1000.0) * factor : 0;
    }
    if (second) {
      d.runner_up = std::string(second->Name());
      d.runner_up_us = second_us;
    }
    out.push_back(d);
  }
  return out;
}

}  // namespace kolo
