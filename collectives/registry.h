// The table of all-reduce algorithms and the Selector that picks the cheapest one that
// supports an input. Deterministic from shared facts, so every rank picks the same.
#ifndef KOLO_COLLECTIVES_REGISTRY_H_
#define KOLO_COLLECTIVES_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "collectives/algorithm.h"

namespace kolo {

// One instance of every algorithm built into this binary, in table order.
std::vector<std::unique_ptr<AllreduceAlgorithm>> MakeAllreduceAlgorithms();

class AllreduceSelector {
 public:
  // forced: "" or "auto" for the cost model, else an algorithm's Name().
  explicit AllreduceSelector(std::string forced = "");
  // The algorithm to run, or kUnimplemented listing why each candidate was rejected.
  StatusOr<AllreduceAlgorithm*> Select(const SelectionInput& in) const;

 private:
  std::vector<std::unique_ptr<AllreduceAlgorithm>> algorithms_;
  std::string forced_;
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_REGISTRY_H_
