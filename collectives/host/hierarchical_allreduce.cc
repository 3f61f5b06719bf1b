#include "collectives/host/hierarchical_allreduce.h"

#include <cmath>
#include <cstring>
#include <string>

#include "collectives/host/flat_common.h"
#include "collectives/host/node_pieces.h"
#include "collectives/node_context.h"
#include "collectives/reduce.h"

namespace kolo {
namespace {

constexpr int kTagReduce = 0x4b01;  // phase 1 slices
constexpr int kTagGather = 0x4b02;  // phase 3 slices
constexpr int kTagOk = 0x4b03;      // phase 3: 1 when the owner's slice is valid

}  // namespace

HierarchicalAllreduce::HierarchicalAllreduce(CrossChooser choose_cross)
    : choose_cross_(std::move(choose_cross)) {}

Status HierarchicalAllreduce::Supports(const SelectionInput& in) const {
  KOLO_RETURN_IF_ERROR(internal::SupportsKernelOp(Name(), in));
  if (!in.has_node_context) {
    return UnimplementedError("needs a node context (node-local and cross-node communicators)");
  }
  if (in.nodes < 2) {
    return UnimplementedError("all ranks are on one node: there is no cross-node step");
  }
  return Status::OK();
}

// Phase 2's input for one slice of a piece of `piece_count` elements: the largest of the
// owners' slices (they cross at once, so the largest sets the pace), over a communicator of one
// rank per node.
SelectionInput HierarchicalAllreduce::SliceInput(const SelectionInput& top, size_t piece_count,
                                                 int owners, int nodes) {
  SelectionInput ci;
  ci.count = MaxSliceElems(piece_count, owners);
  ci.bytes = ci.count * DataTypeSize(top.dtype);
  ci.dtype = top.dtype;
  ci.op = top.op;
  ci.ranks = ci.nodes = nodes;
  ci.backend = top.backend;
  ci.native_collectives = top.native_collectives;
  ci.cost = top.cost;
  return ci;
}

// Phases 1 and 3 inside the node, then phase 2 as whatever it runs, piece by piece.
double HierarchicalAllreduce::EstimateMicros(const SelectionInput& in) const {
  const CostModel& c = *in.cost;
  const double n = static_cast<double>(in.bytes);
  const double big = std::max(1, in.max_local_size), m = std::max(1, in.min_local_size);
  const double pieces = std::max(1.0, std::ceil(n / static_cast<double>(kDefaultNodePieceBytes)));
  const double intra =
      in.shm_capable
          ? 2 * n * c.copy_us + (big - 1) * n / m * c.gamma_us + 2 * pieces * c.sync_us
          : 2 * pieces * (big - 1) * c.intra.alpha_us + 2 * n * (big - 1) / big * c.intra.beta_us +
                (big - 1) * n / m * c.gamma_us;
  const size_t es = DataTypeSize(in.dtype);
  const size_t piece = kDefaultNodePieceBytes / es, whole = in.count / piece,
               rest = in.count % piece;
  const int owners = std::max(1, in.min_local_size), nodes = std::max(2, in.nodes);
  double cross = 0;
  if (whole > 0) {
    cross += static_cast<double>(whole) *
             ChooseCross(SliceInput(in, piece, owners, nodes), owners).micros;
  }
  if (rest > 0) cross += ChooseCross(SliceInput(in, rest, owners, nodes), owners).micros;
  return intra + cross;
}

HierarchicalAllreduce::CrossChoice HierarchicalAllreduce::ChooseCross(const SelectionInput& cross,
                                                                      int flows_per_node) const {
  if (choose_cross_) {
    const CrossChoice chosen = choose_cross_(cross, flows_per_node);
    if (chosen.algorithm) return chosen;
  }
  return {nullptr, native_.EstimateMicros(cross)};
}

Status HierarchicalAllreduce::Run(Communicator& comm, const AllreduceArgs& args) {
  return HierarchicalAllreduce::RunWithPostscale(comm, args, 1.0);  // not a subclass's
}

Status HierarchicalAllreduce::RunWithPostscale(Communicator& comm, const AllreduceArgs& args,
                                               double postscale) {
  NodeContext* node = comm.node();
  if (!node || !node->local || !node->cross) {
    return FailedPreconditionError("hierarchical all-reduce: the communicator has no node context");
  }
  if (args.count == 0) return Status::OK();
  Communicator& local = *node->local;
  Communicator& cross = *node->cross;
  const int owners = node->map.min_local_size();

  // Phase 2's algorithm, from what every owner of one slice index shares: the slice size of a
  // full piece, the dtype and op, the cross communicator.
  AllreduceAlgorithm* cross_algo = nullptr;
  if (local.Rank() < owners) {
    SelectionInput top;
    top.dtype = args.dtype;
    top.op = args.op;
    top.backend = cross.BackendName();
    top.native_collectives = cross.HasNativeCollectives();
    top.cost = &cross_cost_;
    const size_t piece = std::min(args.count, reducer_.piece_bytes() / DataTypeSize(args.dtype));
    cross_algo = ChooseCross(SliceInput(top, piece, owners, cross.Size()), owners).algorithm;
    if (!cross_algo) cross_algo = &native_;
  }
  // Phase 2, and the postscale while the slice is at hand: every element has one owner, so it
  // is scaled once, and phase 3's copies carry the scaled values.
  const ShmNodeReducer::SliceHook hook = [&](void* data, size_t count, int slice) -> Status {
    AllreduceArgs a{data, data, count, args.dtype, args.op};
    Status s;
    if (postscale == 1.0) {
      s = cross_algo->Run(cross, a);
    } else if (cross_algo->CanRunScaled(args.dtype)) {
      s = cross_algo->RunScaled(cross, a, postscale);
    } else {
      s = cross_algo->Run(cross, a);
      if (s.ok()) s = ScaleCopy(data, data, count, args.dtype, postscale);
    }
    if (!s.ok()) {
      s.AddContext("hierarchical all-reduce: cross-node " + std::string(cross_algo->Name()) +
                   " all-reduce of slice " + std::to_string(slice) + " (node " +
                   std::to_string(cross.Rank()) + " of " + std::to_string(cross.Size()) + ")");
    }
    return s;
  };
  if (node->shm_capable && !force_point_to_point_) {
    return reducer_.Run(local, args, owners, hook);
  }
  return RunPointToPoint(local, args, owners, hook);
}

// Phases 1 and 3 over messages, piece by piece (the same pieces and slices as the shared
// segment's path). Owner k receives slice k from every other local rank into its own receive
// buffer (scratch, (L-1) slices), reduces in local-rank order into the result buffer, runs
// phase 2 on it, and sends it back to every other local rank together with a word saying
// whether phase 2 succeeded, so that a failed owner does not leave its peers waiting.
Status HierarchicalAllreduce::RunPointToPoint(Communicator& local, const AllreduceArgs& args,
                                              int owners, const ShmNodeReducer::SliceHook& hook) {
  const int size = local.Size(), me = local.Rank();
  const int mine = me < owners ? me : -1;
  const size_t es = DataTypeSize(args.dtype);
  const size_t piece_elems = reducer_.piece_bytes() / es;
  const size_t slice_bytes = RoundUp64(MaxSliceElems(piece_elems, owners) * es);
  if (scratch_.size() < static_cast<size_t>(size) * slice_bytes) {
    scratch_.assign(static_cast<size_t>(size) * slice_bytes, 0);
  }
  // Receive buffer of local rank r (r != me), and the result.
  auto recv_of = [&](int r) { return scratch_.data() + (r < me ? r : r - 1) * slice_bytes; };
  char* result = scratch_.data() + (size - 1) * slice_bytes;
  const char* in = static_cast<const char*>(args.send);
  char* out = static_cast<char*>(args.recv);
  std::vector<uint64_t> ok(owners, 0);
  uint64_t my_ok = 1;

  for (size_t first = 0; first < args.count; first += piece_elems) {
    const size_t n = std::min(piece_elems, args.count - first);
    const char* piece_in = in + first * es;
    const std::string where = " (elements " + std::to_string(first) + "+" + std::to_string(n) +
                              ", local rank " + std::to_string(me) + " of " + std::to_string(size) +
                              ")";
    std::vector<P2POp> ops;
    const SliceRange own = mine >= 0 ? SliceOf(n, owners, mine) : SliceRange{};
    for (int r = 0; r < size && mine >= 0; ++r) {
      if (r != me) ops.push_back(P2POp::Recv(recv_of(r), own.count * es, r, kTagReduce));
    }
    for (int k = 0; k < owners; ++k) {
      const SliceRange sl = SliceOf(n, owners, k);
      if (k != me)
        ops.push_back(P2POp::Send(piece_in + sl.offset * es, sl.count * es, k, kTagReduce));
    }
    {
      auto batch = local.Start(ops);
      if (!batch.ok()) {
        Status st = batch.status();
        return st.AddContext("hierarchical reduce-scatter" + where);
      }
      KOLO_RETURN_IF_ERROR((*batch)->Wait().AddContext("hierarchical reduce-scatter" + where));
    }

    Status phase2;
    if (mine >= 0) {
      auto src = [&](int r) -> const char* {
        return r == me ? piece_in + own.offset * es : recv_of(r);
      };
      if (size == 1) std::memcpy(result, src(0), own.count * es);
      for (int r = 1; r < size; ++r) {
        KOLO_RETURN_IF_ERROR(
            ReducePair(result, r == 1 ? src(0) : result, src(r), own.count, args.dtype, args.op));
      }
      if (own.count) phase2 = hook(result, own.count, mine);
      my_ok = phase2.ok() ? 1 : 0;
    }

    ops.clear();
    for (int k = 0; k < owners; ++k) {
      if (k == me) continue;
      const SliceRange sl = SliceOf(n, owners, k);
      ops.push_back(P2POp::Recv(&ok[k], sizeof(uint64_t), k, kTagOk));
      ops.push_back(P2POp::Recv(out + (first + sl.offset) * es, sl.count * es, k, kTagGather));
    }
    for (int r = 0; r < size && mine >= 0; ++r) {
      if (r == me) continue;
      ops.push_back(P2POp::Send(&my_ok, sizeof(uint64_t), r, kTagOk));
      ops.push_back(P2POp::Send(result, own.count * es, r, kTagGather));
    }
    {
      auto batch = local.Start(ops);
      if (!batch.ok()) {
        Status st = batch.status();
        return st.AddContext("hierarchical all-gather" + where);
      }
      KOLO_RETURN_IF_ERROR((*batch)->Wait().AddContext("hierarchical all-gather" + where));
    }
    if (!phase2.ok()) return phase2;
    for (int k = 0; k < owners; ++k) {
      if (k != me && ok[k] != 1) {
        return UnavailableError("hierarchical all-reduce: local rank " + std::to_string(k) +
                                " failed its cross-node step" + where);
      }
    }
    if (mine >= 0) std::memcpy(out + (first + own.offset) * es, result, own.count * es);
  }
  return Status::OK();
}

}  // namespace kolo
