#include "collectives/host/tree_link.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "collectives/host/tree_shapes.h"

namespace kolo {
namespace {

double CountEgress(TreeShape shape, int ranks, int local_size) {
  const int trees = shape == TreeShape::kBinomial ? 1 : 2;
  const double share = 1.0 / trees;  // of the message, on each edge of one tree
  const int nodes = (ranks + local_size - 1) / local_size;
  // [phase][node]: phase 0 reduces (child to parent), phase 1 broadcasts (parent to children).
  std::vector<std::vector<double>> out(2, std::vector<double>(nodes, 0.0));
  for (int t = 0; t < trees; ++t) {
    for (int r = 0; r < ranks; ++r) {
      const TreeNode node = shape == TreeShape::kBinomial ? BinomialTreeNode(r, ranks)
                                                          : DoubleBinaryTreeNode(t, r, ranks);
      const int mine = r / local_size;
      if (node.parent >= 0 && node.parent / local_size != mine) out[0][mine] += share;
      for (int child : node.children) {
        if (child / local_size != mine) out[1][mine] += share;
      }
    }
  }
  double busiest = 0;
  for (const auto& phase : out) {
    for (double bytes : phase) busiest = std::max(busiest, bytes);
  }
  return busiest;
}

}  // namespace

double TreeNodeEgress(TreeShape shape, int ranks, int local_size) {
  if (ranks <= 1 || local_size <= 0) return 0;
  // The selector asks for every message; the trees of a layout do not change: counted once
  // per thread and layout (each rank's place in each tree computed once: a few log p steps).
  thread_local std::unordered_map<uint64_t, double> counted;
  const uint64_t key = (static_cast<uint64_t>(shape == TreeShape::kDoubleBinary) << 62) |
                       (static_cast<uint64_t>(ranks) << 31) | static_cast<uint32_t>(local_size);
  auto it = counted.find(key);
  if (it == counted.end()) it = counted.emplace(key, CountEgress(shape, ranks, local_size)).first;
  return it->second;
}

LinkCost TreeLink(const SelectionInput& in, TreeShape shape) {
  if (in.nodes <= 1) return in.cost->intra;
  const int local = in.min_local_size;
  if (local <= 0 || in.max_local_size != local || in.ranks != in.nodes * local) {
    return FlatLink(in);
  }
  const double egress = TreeNodeEgress(shape, in.ranks, local);
  const LinkCost alone = RingLink(in);
  return {in.cost->inter.alpha_us, std::max(egress * alone.beta_us, in.cost->intra.beta_us)};
}

}  // namespace kolo
