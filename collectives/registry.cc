#include "collectives/registry.h"

#include "collectives/native_allreduce.h"

namespace kolo {

std::vector<std::unique_ptr<AllreduceAlgorithm>> MakeAllreduceAlgorithms() {
  std::vector<std::unique_ptr<AllreduceAlgorithm>> table;
  table.push_back(std::make_unique<NativeAllreduce>());
  return table;
}

AllreduceSelector::AllreduceSelector(std::string forced)
    : algorithms_(MakeAllreduceAlgorithms()), forced_(forced == "auto" ? "" : std::move(forced)) {}

StatusOr<AllreduceAlgorithm*> AllreduceSelector::Select(const SelectionInput& in) const {
  AllreduceAlgorithm* best = nullptr;
  double best_us = 0;
  std::string rejected;
  for (const auto& algo : algorithms_) {
    if (!forced_.empty() && algo->Name() != forced_) continue;
    Status s = algo->Supports(in);
    if (!s.ok()) {
      rejected += (rejected.empty() ? "" : "; ") + s.message();
      continue;
    }
    const double us = algo->EstimateMicros(in);
    if (!best || us < best_us) {
      best = algo.get();
      best_us = us;
    }
  }
  if (best) return best;
  if (!forced_.empty() && rejected.empty()) {
    return UnimplementedError("allreduce algorithm '" + forced_ + "' does not exist in this build");
  }
  return UnimplementedError("no allreduce algorithm for " + std::to_string(in.bytes) + " bytes of " +
                            std::string(DataTypeName(in.dtype)) + ": " + rejected);
}

}  // namespace kolo
