#include "runtime/world/bootstrap.h"

namespace kolo {

RankLayout LayoutFromNodes(int rank, const NodeMap& nodes) {
  RankLayout l;
  l.rank = rank;
  l.size = nodes.ranks();
  l.local_rank = nodes.local_rank_of[static_cast<size_t>(rank)];
  l.local_size = nodes.node_sizes[static_cast<size_t>(nodes.node_of_rank[rank])];
  l.cross_rank = 0;
  l.cross_size = 0;
  for (int r = 0; r < nodes.ranks(); ++r) {
    if (nodes.local_rank_of[static_cast<size_t>(r)] != l.local_rank) continue;
    if (r < rank) ++l.cross_rank;
    ++l.cross_size;
  }
  return l;
}

}  // namespace kolo
