// The hierarchical composition of collectives/hierarchical_composition.h on host memory in the
// thread world (the composition the NCCL path runs on GPUs, tested where no GPU is):
// node groupings 2x2, 3+2, 1+3 and 2x3, every dtype x op x count of the algorithm suite against
// the float64 reference (tests/unit/algorithm_check.h), in and out of place, results bitwise
// equal on every rank.
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "collectives/hierarchical_composition.h"
#include "collectives/node_context.h"
#include "unit/algorithm_check.h"
#include "unit/thread_world.h"

namespace kolo {
namespace {

// The composition behind the AllreduceAlgorithm interface, so the suite's checks apply; its
// scratch is host memory owned per rank.
class ComposedHierarchical : public AllreduceAlgorithm {
 public:
  std::string_view Name() const override { return "composed_hierarchical"; }
  Status Supports(const SelectionInput& in) const override {
    if (!in.has_node_context || in.nodes < 2) return UnimplementedError("needs several nodes");
    return Status::OK();
  }
  double EstimateMicros(const SelectionInput&) const override { return 0; }
  Status Run(Communicator& comm, const AllreduceArgs& args) override {
    NodeContext* node = comm.node();
    if (node == nullptr) return FailedPreconditionError("no node context");
    return ComposeHierarchicalAllreduce(*node->local, *node->cross, node->map.min_local_size(),
                                        args, [this](size_t bytes) {
                                          if (scratch_.size() < bytes) scratch_.resize(bytes);
                                          return static_cast<void*>(scratch_.data());
                                        });
  }

 private:
  std::vector<char> scratch_;
};

struct Grouping {
  int ranks;
  const char* spec;
};

class HierarchicalCompositionTest : public ::testing::TestWithParam<Grouping> {};

TEST_P(HierarchicalCompositionTest, EveryDtypeOpCountMatchesReference) {
  const Grouping g = GetParam();
  std::mutex mu;
  std::vector<std::string> failures;
  size_t ran = 0;
  testing::RunOnThreadWorld(g.ranks, g.spec, [&](Communicator& comm) {
    ComposedHierarchical algo;
    int index = 0;
    for (DataType t : testing::AllAlgorithmDtypes()) {
      for (ReduceOp op : testing::KernelOps()) {
        for (size_t count : testing::AlgorithmCounts(g.ranks, /*with_large=*/false)) {
          testing::CaseResult r =
              testing::CheckAllreduceCase(comm, algo, t, op, count, (index++ % 2) == 0);
          std::lock_guard<std::mutex> lock(mu);
          ran += r.ran ? 1 : 0;
          if (!r.failure.empty() && failures.size() < 20) failures.push_back(r.failure);
        }
      }
    }
    for (size_t count : {size_t{1}, size_t{1000}, size_t{65537}}) {
      const std::string f = testing::CheckRandomFloat32Sum(comm, algo, count);
      std::lock_guard<std::mutex> lock(mu);
      if (!f.empty()) failures.push_back(f);
    }
  });
  for (const std::string& f : failures) ADD_FAILURE() << f;
  EXPECT_GT(ran, 0u);
}

INSTANTIATE_TEST_SUITE_P(Groupings, HierarchicalCompositionTest,
                         ::testing::Values(Grouping{4, "2x2"}, Grouping{5, "3+2"},
                                           Grouping{4, "1+3"}, Grouping{6, "2x3"}),
                         [](const auto& info) {
                           std::string s = info.param.spec;
                           for (char& c : s) c = (c == '+' ? 'p' : c);
                           return "g" + s;
                         });

}  // namespace
}  // namespace kolo
