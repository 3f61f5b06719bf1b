#include "collectives/host/dbtree_allreduce.h"

#include <algorithm>
#include <cmath>

#include "collectives/host/flat_common.h"
#include "collectives/host/tree_allreduce.h"
#include "collectives/host/tree_link.h"

namespace kolo {

Status DoubleBinaryTreeAllreduce::Supports(const SelectionInput& in) const {
  return internal::SupportsKernelOp(Name(), in);
}

double DoubleBinaryTreeAllreduce::EstimateMicros(const SelectionInput& in) const {
  if (in.ranks <= 1) return 0;
  const double depth = std::floor(std::log2(in.ranks));
  const double n = static_cast<double>(in.bytes);
  const double s = std::max(1.0, std::ceil(n / 2 / static_cast<double>(segment_bytes_)));
  const LinkCost link = TreeLink(in, TreeShape::kDoubleBinary);
  return 2 * (depth + s - 1) * (2 * link.alpha_us + n / s * link.beta_us) + n * in.cost->gamma_us;
}

Status DoubleBinaryTreeAllreduce::Run(Communicator& comm, const AllreduceArgs& args) {
  const int rank = comm.Rank(), size = comm.Size();
  const std::vector<TreeNode> trees = {DoubleBinaryTreeNode(0, rank, size),
                                       DoubleBinaryTreeNode(1, rank, size)};
  const size_t segment_elems = std::max<size_t>(1, segment_bytes_ / DataTypeSize(args.dtype));
  const size_t first_half = (args.count + 1) / 2;
  halves_[0].clear();
  halves_[1].clear();
  AppendSegments(0, first_half, segment_elems, 0, &halves_[0]);
  AppendSegments(first_half, args.count - first_half, segment_elems, 1, &halves_[1]);
  pieces_.clear();
  for (size_t k = 0; k < std::max(halves_[0].size(), halves_[1].size()); ++k) {
    for (const auto& half : halves_) {
      if (k < half.size()) pieces_.push_back(half[k]);
    }
  }
  return pipeline_.Run(comm, args, trees, pieces_, /*tag_base=*/0x7500, "dbtree");
}

}  // namespace kolo
