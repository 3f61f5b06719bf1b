#include "collectives/host/tree_allreduce.h"

#include <algorithm>
#include <cmath>

#include "collectives/host/flat_common.h"
#include "collectives/host/tree_link.h"

namespace kolo {

Status TreeAllreduce::Supports(const SelectionInput& in) const {
  return internal::SupportsKernelOp(Name(), in);
}

double TreeAllreduce::EstimateMicros(const SelectionInput& in) const {
  if (in.ranks <= 1) return 0;
  const double d = CeilLog2(in.ranks);
  const double n = static_cast<double>(in.bytes);
  const double s = std::max(1.0, std::ceil(n / static_cast<double>(segment_bytes_)));
  const LinkCost link = TreeLink(in, TreeShape::kBinomial);
  return 2 * (d + s - 1) * (link.alpha_us + n / s * link.beta_us) + d * n * in.cost->gamma_us;
}

Status TreeAllreduce::Run(Communicator& comm, const AllreduceArgs& args) {
  const std::vector<TreeNode> trees = {BinomialTreeNode(comm.Rank(), comm.Size())};
  pieces_.clear();
  AppendSegments(0, args.count, segment_bytes_ / DataTypeSize(args.dtype), 0, &pieces_);
  return pipeline_.Run(comm, args, trees, pieces_, /*tag_base=*/0x7400, "tree");
}

}  // namespace kolo
