#include "collectives/select/registry.h"

#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "base/logging.h"  // fmt
#include "collectives/host/rabenseifner_allreduce.h"
#include "collectives/host/recursive_doubling_allreduce.h"
#include "collectives/host/ring_allreduce.h"
#include "collectives/native_allreduce.h"
#include "collectives/select/measured_estimate.h"
// Tree all-reduces.
#include "collectives/host/dbtree_allreduce.h"
#include "collectives/host/tree_allreduce.h"
// Node-level algorithms (shared memory, hierarchical).
#include "collectives/host/hierarchical_allreduce.h"
#include "collectives/host/shm_allreduce.h"
#include "collectives/node_context.h"
// GPU buffers through NCCL (ranked by the cost model; fusion/device_allreduce.h runs them).
#include "collectives/nccl/nccl_allreduce.h"
#include "collectives/nccl/nccl_hierarchical_allreduce.h"

namespace kolo {

namespace {

// The flat algorithms, for the table and for hierarchical's cross-node step. Ties go to the
// earlier entry: the library's own first, then point-to-point from small to large messages.
void AddFlat(std::vector<std::unique_ptr<AllreduceAlgorithm>>* table) {
  table->push_back(std::make_unique<NativeAllreduce>());
  table->push_back(std::make_unique<RecursiveDoublingAllreduce>());
  table->push_back(std::make_unique<RabenseifnerAllreduce>());
  table->push_back(std::make_unique<RingAllreduce>());
  // Tree all-reduces: small to mid messages, many ranks.
  table->push_back(std::make_unique<TreeAllreduce>());
  table->push_back(std::make_unique<DoubleBinaryTreeAllreduce>());
}

// Phase 2 of hierarchical: the cheapest flat algorithm for one slice over the cross
// communicator. The choice is remembered per slice shape: the executor prices hierarchical for
// every operation and Run asks again, so without it each operation would rank the flat table up
// to twice per piece size on the background loop.
class CrossPicker {
 public:
  explicit CrossPicker(std::shared_ptr<const CostModel> cost) : cost_(std::move(cost)) {
    AddFlat(&flat_);
    // Phase 2 runs every owner's slice across the nodes at once, so with two or more owners per
    // node each flow between nodes has its share of the NIC, never the NIC alone. With one (one
    // rank per node) phase 2 is the flat all-reduce over the nodes, costed as at the top level.
    auto shared = std::make_shared<CostModel>(*cost_);
    shared->inter_sharing = 1;
    shared->inter_duplex = 1;  // inter is each rank's rate with every rank swapping already
    shared_cost_ = std::move(shared);
  }

  HierarchicalAllreduce::CrossChoice Choose(const SelectionInput& slice, int flows_per_node) {
    const Key key{slice.count,       static_cast<int>(slice.dtype), static_cast<int>(slice.op),
                  slice.ranks,       std::string(slice.backend),    slice.native_collectives,
                  flows_per_node > 1};
    std::lock_guard<std::mutex> lock(mu_);
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    SelectionInput in = slice;
    in.cost = flows_per_node > 1 ? shared_cost_.get() : cost_.get();
    const HierarchicalAllreduce::CrossChoice chosen = Rank(in);
    if (chosen.algorithm) {
      KOLO_LOG_DEBUG("select",
                     "hierarchical phase 2: {} B slices over {} nodes, {} per node at once: {} "
                     "({:.0f} us)",
                     in.bytes, in.ranks, flows_per_node, chosen.algorithm->Name(), chosen.micros);
    }
    // A full piece's slice is one entry per dtype; the rest of a message (its last, shorter
    // piece) is one per message size, so a job of ever-new fused sizes starts over now and then.
    if (memo_.size() >= kMaxRemembered) memo_.clear();
    memo_.emplace(key, chosen);
    return chosen;
  }

 private:
  using Key = std::tuple<size_t, int, int, int, std::string, bool, bool>;
  static constexpr size_t kMaxRemembered = 4096;

  // kolo's own algorithms first; the library's all-reduce only where none of them takes the
  // input. Phase 2's communicator spans nodes, where MpiCommunicator runs MPI's collectives
  // non-blocking (Open MPI's libnbc) so that a lost node cannot hang it, and libnbc's all-reduce
  // between 2 nodes took 1.65x kolo's ring there (15.5 ms against 9.4 ms for 1 MiB at 2x2 over
  // 1 Gbit/s links, docs/benchmarks.md "Across nodes"), while the cost model ranks it as a
  // bandwidth-optimal all-reduce.
  HierarchicalAllreduce::CrossChoice Rank(const SelectionInput& in) const {
    for (bool library : {false, true}) {
      AllreduceAlgorithm* best = nullptr;
      double best_us = 0;
      for (const auto& algo : flat_) {
        const bool is_library = dynamic_cast<const NativeAllreduce*>(algo.get()) != nullptr;
        if (is_library != library || !algo->Supports(in).ok()) continue;
        const double us = algo->EstimateMicros(in);
        if (!best || us < best_us) {
          best = algo.get();
          best_us = us;
        }
      }
      if (best) return {best, best_us};
    }
    return {};
  }

  std::vector<std::unique_ptr<AllreduceAlgorithm>> flat_;
  std::shared_ptr<const CostModel> cost_, shared_cost_;
  std::mutex mu_;  // EstimateMicros is const: a shared selector may price from several threads
  std::map<Key, HierarchicalAllreduce::CrossChoice> memo_;
};

}  // namespace

std::vector<std::unique_ptr<AllreduceAlgorithm>> MakeAllreduceAlgorithms(
    std::shared_ptr<const CostModel> cost, NcclAllreduceAlgorithm nccl,
    HandoverWatch::Mode shm_stores) {
  if (!cost) cost = std::make_shared<const CostModel>();
  std::vector<std::unique_ptr<AllreduceAlgorithm>> table;
  AddFlat(&table);
  // Node-level algorithms: one node through shared memory; several nodes in three phases.
  auto shm = std::make_unique<ShmAllreduce>();
  shm->reducer().set_stream_mode(shm_stores);
  table.push_back(std::move(shm));
  // Hierarchical's cross-node step runs the cheapest flat algorithm for its slice, by the same
  // cost model (its own instances: their scratch is separate from the top-level ones').
  auto picker = std::make_shared<CrossPicker>(cost);
  auto hierarchical = std::make_unique<HierarchicalAllreduce>(
      [picker](const SelectionInput& slice, int flows_per_node) {
        return picker->Choose(slice, flows_per_node);
      });
  hierarchical->reducer().set_stream_mode(shm_stores);
  table.push_back(std::move(hierarchical));
  // GPU buffers: NCCL's own all-reduce (its ring or tree), and the three-phase composition
  // with NCCL inside the nodes.
  table.push_back(std::make_unique<NcclAllreduce>(nccl));
  table.push_back(std::make_unique<NcclHierarchicalAllreduce>());
  return table;
}

std::string_view MemoryKindName(MemoryKind m) { return m == MemoryKind::kCuda ? "cuda" : "host"; }

SelectionInput DescribeCommunicator(const Communicator& comm) {
  SelectionInput in;
  in.ranks = comm.Size();
  in.backend = comm.BackendName();
  in.native_collectives = comm.HasNativeCollectives();
  in.max_local_size = in.min_local_size = in.ranks;
  if (const NodeContext* node = comm.node()) {
    in.nodes = node->map.nodes();
    in.max_local_size = node->map.max_local_size();
    in.min_local_size = node->map.min_local_size();
    in.has_node_context = node->local && node->cross;
    in.shm_capable = node->shm_capable;
  }
  return in;
}

AllreduceSelector::AllreduceSelector(std::string forced, CostModel cost, std::string_view nccl_algo,
                                     std::string_view shm_stores)
    : cost_(std::make_shared<const CostModel>(std::move(cost))),
      algorithms_(
          MakeAllreduceAlgorithms(cost_, ParseNcclAlgo(nccl_algo), ShmStoresOrAuto(shm_stores))),
      forced_(forced == "auto" ? "" : std::move(forced)) {}

AllreduceAlgorithm* AllreduceSelector::Find(std::string_view name) const {
  for (const auto& algo : algorithms_) {
    if (algo->Name() == name) return algo.get();
  }
  return nullptr;
}

std::vector<std::pair<AllreduceAlgorithm*, double>> AllreduceSelector::Rank(
    SelectionInput in) const {
  in.cost = cost_.get();
  std::vector<std::pair<AllreduceAlgorithm*, double>> out;
  for (const auto& algo : algorithms_) {
    const bool ok = algo->memory() == in.memory && algo->Supports(in).ok();
    out.emplace_back(algo.get(), ok ? MeasuredEstimate(*algo, in) : -1.0);
  }
  return out;
}

StatusOr<AllreduceAlgorithm*> AllreduceSelector::Select(SelectionInput in) const {
  in.cost = cost_.get();
  AllreduceAlgorithm* best = nullptr;
  double best_us = 0;
  std::string rejected;
  for (const auto& algo : algorithms_) {
    if (!forced_.empty() && algo->Name() != forced_) continue;
    // Algorithms for the other memory kind are not candidates; named only when forced.
    if (forced_.empty() && algo->memory() != in.memory) continue;
    Status s = algo->memory() == in.memory
                   ? algo->Supports(in)
                   : UnimplementedError("runs on " + std::string(MemoryKindName(algo->memory())) +
                                        " buffers, this input is in " +
                                        std::string(MemoryKindName(in.memory)) + " memory");
    if (!s.ok()) {
      rejected += (rejected.empty() ? "" : "; ") + std::string(algo->Name()) + ": " + s.message();
      continue;
    }
    const double us = MeasuredEstimate(*algo, in);
    if (!best || us < best_us) {
      best = algo.get();
      best_us = us;
    }
  }
  if (best) return best;
  if (!forced_.empty() && rejected.empty()) {
    std::string names;
    for (const auto& algo : algorithms_) names += (names.empty() ? "" : ", ") + std::string(algo->Name());
    // The two names NCCL's all-reduce had before it became one entry: NCCL picks its ring or
    // tree itself, and only NCCL_ALGO binds it.
    const bool nccl_own = forced_ == "nccl_ring" || forced_ == "nccl_tree";
    return UnimplementedError(fmt::format(
        "KOLO_ALLREDUCE_ALGO={}: no such all-reduce algorithm in this build (auto, {}){}", forced_,
        names,
        nccl_own ? fmt::format("; NCCL chooses its ring or tree itself: KOLO_ALLREDUCE_ALGO=nccl "
                               "with NCCL_ALGO={} in the environment forces it",
                               forced_ == "nccl_ring" ? "Ring" : "Tree")
                 : ""));
  }
  const std::string subject = std::to_string(in.bytes) + " bytes of " +
                              std::string(DataTypeName(in.dtype)) + " over " +
                              std::to_string(in.ranks) + " ranks";
  if (!forced_.empty()) {
    return UnimplementedError("KOLO_ALLREDUCE_ALGO=" + forced_ + " cannot all-reduce " + subject +
                              ": " + rejected);
  }
  return UnimplementedError("no all-reduce algorithm for " + subject + ": " + rejected);
}

}  // namespace kolo
