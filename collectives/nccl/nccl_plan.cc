#include "collectives/nccl/nccl_plan.h"

#include <algorithm>

namespace kolo {

std::vector<size_t> PartOffsets(const std::vector<size_t>& parts) {
  std::vector<size_t> offsets(parts.size() + 1, 0);
  for (size_t r = 0; r < parts.size(); ++r) offsets[r + 1] = offsets[r] + parts[r];
  return offsets;
}

bool EqualParts(const std::vector<size_t>& parts) {
  return std::all_of(parts.begin(), parts.end(),
                     [&](size_t p) { return p == parts.front(); });
}

ReducescatterPlan PlanReducescatter(const std::vector<size_t>& counts) {
  ReducescatterPlan plan;
  plan.counts = counts;
  plan.offsets = PartOffsets(counts);
  plan.offsets.pop_back();
  plan.padded = counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
  plan.staged = !EqualParts(counts);
  return plan;
}

}  // namespace kolo
