#include "collectives/hierarchical_composition.h"

#include <string>
#include <vector>

namespace kolo {

Status ComposeHierarchicalAllreduce(Communicator& local, Communicator& cross, int owners,
                                    const AllreduceArgs& args,
                                    const std::function<void*(size_t)>& scratch) {
  if (owners < 1 || owners > local.Size()) {
    return InvalidArgumentError("hierarchical composition: " + std::to_string(owners) +
                                " slice owners on a node of " + std::to_string(local.Size()));
  }
  if (args.count == 0) return Status::OK();
  const size_t es = DataTypeSize(args.dtype);
  // Slice k of n elements: the first n % m slices one element longer.
  std::vector<size_t> counts(local.Size(), 0), bytes(local.Size(), 0);
  const size_t m = static_cast<size_t>(owners);
  for (size_t k = 0; k < m; ++k) {
    counts[k] = args.count / m + (k < args.count % m ? 1 : 0);
    bytes[k] = counts[k] * es;
  }
  const int me = local.Rank();
  const size_t mine = counts[me];
  void* slice = scratch(mine * es > 0 ? mine * es : es);
  if (slice == nullptr) return InternalError("hierarchical composition: no scratch buffer");
  const std::string where = " (local rank " + std::to_string(me) + " of " +
                            std::to_string(local.Size()) + ")";
  KOLO_RETURN_IF_ERROR(local.ReduceScatter(args.send, slice, counts, args.dtype, args.op)
                           .AddContext("hierarchical phase 1, reduce-scatter" + where));
  if (me < owners && mine > 0) {
    KOLO_RETURN_IF_ERROR(cross.Allreduce(slice, slice, mine, args.dtype, args.op)
                             .AddContext("hierarchical phase 2, all-reduce over " +
                                         std::to_string(cross.Size()) + " nodes" + where));
  }
  KOLO_RETURN_IF_ERROR(local.Allgatherv(slice, mine * es, args.recv, bytes)
                           .AddContext("hierarchical phase 3, all-gather" + where));
  return Status::OK();
}

}  // namespace kolo
