// The table of all-reduce algorithms and the Selector that picks the cheapest one that
// supports an input. Deterministic from shared facts, so every rank picks the same.
#ifndef KOLO_COLLECTIVES_SELECT_REGISTRY_H_
#define KOLO_COLLECTIVES_SELECT_REGISTRY_H_

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "collectives/algorithm.h"
#include "collectives/host/handover_watch.h"
#include "collectives/nccl/nccl_allreduce.h"

namespace kolo {

// One instance of every algorithm built into this binary, in table order. `cost` is the model
// the algorithms that choose inner algorithms use (hierarchical's cross-node step); nullptr =
// the built-in defaults. `nccl`: what NCCL_ALGO leaves NCCL's all-reduce (its estimate).
// `shm_stores`: how the shared-memory engine (shm, hierarchical) stores what its peers read
// next (KOLO_SHM_STORES, handover_watch.h).
std::vector<std::unique_ptr<AllreduceAlgorithm>> MakeAllreduceAlgorithms(
    std::shared_ptr<const CostModel> cost = nullptr,
    NcclAllreduceAlgorithm nccl = NcclAllreduceAlgorithm::kEither,
    HandoverWatch::Mode shm_stores = HandoverWatch::Mode::kAuto);

class AllreduceSelector {
 public:
  // forced: "" or "auto" for the cost model, else an algorithm's Name() (KOLO_ALLREDUCE_ALGO).
  // nccl_algo: NCCL_ALGO's value, which binds what NCCL runs (ParseNcclAlgo). shm_stores:
  // KOLO_SHM_STORES's word (ParseShmStores; anything else is "auto").
  explicit AllreduceSelector(std::string forced = "", CostModel cost = CostModel(),
                             std::string_view nccl_algo = "", std::string_view shm_stores = "auto");
  // The algorithm to run (the cheapest predicted one that supports `in`, ties to the earlier
  // in the table), or kUnimplemented listing why each candidate was rejected. `in.cost` is
  // replaced by this selector's cost model.
  StatusOr<AllreduceAlgorithm*> Select(SelectionInput in) const;
  // Every algorithm's prediction for `in` (negative: not supported), in table order.
  std::vector<std::pair<AllreduceAlgorithm*, double>> Rank(SelectionInput in) const;
  const CostModel& cost() const { return *cost_; }
  AllreduceAlgorithm* Find(std::string_view name) const;

 private:
  // Declared first: the algorithms hold it (a shared_ptr, so moving the selector keeps it).
  std::shared_ptr<const CostModel> cost_;
  std::vector<std::unique_ptr<AllreduceAlgorithm>> algorithms_;
  std::string forced_;
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_SELECT_REGISTRY_H_
