#include "collectives/host/tree_link.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "collectives/host/tree_shapes.h"

namespace kolo {
namespace {

// The busiest node's outgoing share of a segment in one phase: over every node and phase, and
// over those in which the node's link also carries edges coming in.
struct Egress {
  double any = 0;
  double both_ways = 0;
};

Egress CountEgress(TreeShape shape, int ranks, int local_size) {
  const int trees = shape == TreeShape::kBinomial ? 1 : 2;
  const double share = 1.0 / trees;  // of the message, on each edge of one tree
  const int nodes = (ranks + local_size - 1) / local_size;
  // [phase][node]: phase 0 reduces (child to parent), phase 1 broadcasts (parent to children).
  std::vector<std::vector<double>> out(2, std::vector<double>(nodes, 0.0));
  std::vector<std::vector<double>> in(2, std::vector<double>(nodes, 0.0));
  for (int t = 0; t < trees; ++t) {
    for (int r = 0; r < ranks; ++r) {
      const TreeNode node = shape == TreeShape::kBinomial ? BinomialTreeNode(r, ranks)
                                                          : DoubleBinaryTreeNode(t, r, ranks);
      const int mine = r / local_size;
      if (node.parent >= 0 && node.parent / local_size != mine) {
        out[0][mine] += share;
        in[0][node.parent / local_size] += share;
      }
      for (int child : node.children) {
        if (child / local_size == mine) continue;
        out[1][mine] += share;
        in[1][child / local_size] += share;
      }
    }
  }
  Egress busiest;
  for (int phase = 0; phase < 2; ++phase) {
    for (int node = 0; node < nodes; ++node) {
      busiest.any = std::max(busiest.any, out[phase][node]);
      if (in[phase][node] > 0) busiest.both_ways = std::max(busiest.both_ways, out[phase][node]);
    }
  }
  return busiest;
}

Egress CountedEgress(TreeShape shape, int ranks, int local_size) {
  // The selector asks for every message; the trees of a layout do not change: counted once
  // per thread and layout (each rank's place in each tree computed once: a few log p steps).
  thread_local std::unordered_map<uint64_t, Egress> counted;
  const uint64_t key = (static_cast<uint64_t>(shape == TreeShape::kDoubleBinary) << 62) |
                       (static_cast<uint64_t>(ranks) << 31) | static_cast<uint32_t>(local_size);
  auto it = counted.find(key);
  if (it == counted.end()) it = counted.emplace(key, CountEgress(shape, ranks, local_size)).first;
  return it->second;
}

}  // namespace

double TreeNodeEgress(TreeShape shape, int ranks, int local_size) {
  if (ranks <= 1 || local_size <= 0) return 0;
  return CountedEgress(shape, ranks, local_size).any;
}

double TreeNodeEgressBothWays(TreeShape shape, int ranks, int local_size) {
  if (ranks <= 1 || local_size <= 0) return 0;
  return CountedEgress(shape, ranks, local_size).both_ways;
}

LinkCost TreeLink(const SelectionInput& in, TreeShape shape) {
  if (in.nodes <= 1) return in.cost->intra;
  const int local = in.min_local_size;
  if (local <= 0 || in.max_local_size != local || in.ranks != in.nodes * local) {
    return FlatLink(in);
  }
  // One flow alone on its NIC, one way: inter is measured with every rank of a node crossing.
  const double alone = in.cost->inter.beta_us / std::max(1.0, in.cost->inter_sharing);
  const Egress egress = CountedEgress(shape, in.ranks, local);  // one lookup for both counts
  const double one_way = egress.any * alone;
  const double both_ways = egress.both_ways * alone * std::max(1.0, in.cost->inter_duplex);
  return {in.cost->inter.alpha_us, std::max({one_way, both_ways, in.cost->intra.beta_us})};
}

}  // namespace kolo
