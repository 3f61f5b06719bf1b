// The coordinator's verdict on one tensor once every rank has asked for it: the Response every
// rank executes, or an error Response naming the ranks and the values that differ (dtype,
// shape, reduce op, scale factors, root, device, splits), and the same with joined ranks.
#include <algorithm>
#include <sstream>

#include "runtime/negotiation/coordinator.h"

namespace kolo {

namespace {

std::string Scale(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

std::string Group(const Request& r) {
  return r.group_size <= 0 ? std::string("no group")
                           : "group '" + r.group + "' of " + std::to_string(r.group_size);
}

std::string MemoryKindName(int device) { return device < 0 ? "cpu" : "cuda"; }

std::string TrailingDims(const std::vector<int64_t>& shape) {
  std::string s = std::to_string(shape.size()) + "d[*";
  for (size_t i = 1; i < shape.size(); ++i) s += "," + std::to_string(shape[i]);
  return s + "]";
}

// One property every rank must agree on. `same` is the fast check every Response pays for;
// `key` (grouping) and `show` (printing) only run to explain a mismatch.
struct Field {
  const char* what;
  bool (*applies)(OpType op);
  bool (*same)(const Request& a, const Request& b);
  std::string (*key)(const Request& r);
  std::string (*show)(const Request& r);
};

bool SameTrailingDims(const Request& a, const Request& b) {
  if (a.shape.size() != b.shape.size()) return false;
  return std::equal(a.shape.begin() + (a.shape.empty() ? 0 : 1), a.shape.end(),
                    b.shape.begin() + (b.shape.empty() ? 0 : 1));
}

bool Always(OpType) { return true; }
// Ops that reduce (reduce op and scale factors must match).
bool Reduces(OpType op) { return op == OpType::kAllreduce || op == OpType::kReducescatter; }
bool IsBroadcast(OpType op) { return op == OpType::kBroadcast; }
// Ops whose first dimension may differ per rank.
bool FirstDimFree(OpType op) { return op == OpType::kAllgather || op == OpType::kAlltoall; }
bool WholeShape(OpType op) { return !FirstDimFree(op); }

const Field kFields[] = {
    {"operation", Always, [](const Request& a, const Request& b) { return a.op == b.op; },
     [](const Request& r) { return std::string(OpTypeName(r.op)); },
     [](const Request& r) { return std::string(OpTypeName(r.op)); }},
    {"dtype", Always, [](const Request& a, const Request& b) { return a.dtype == b.dtype; },
     [](const Request& r) { return std::string(DataTypeName(r.dtype)); },
     [](const Request& r) { return std::string(DataTypeName(r.dtype)); }},
    // Host or GPU memory, not which GPU: each rank drives its own (cuda:local_rank on a
    // multi-GPU node), so ranks agree on the kind and each runs on its tensor's device.
    {"device", Always,
     [](const Request& a, const Request& b) { return (a.device >= 0) == (b.device >= 0); },
     [](const Request& r) { return MemoryKindName(r.device); },
     [](const Request& r) { return MemoryKindName(r.device); }},
    {"shape", WholeShape, [](const Request& a, const Request& b) { return a.shape == b.shape; },
     [](const Request& r) { return ShapeString(r.shape); },
     [](const Request& r) { return ShapeString(r.shape); }},
    {"shape (all but the first dimension)", FirstDimFree, SameTrailingDims,
     [](const Request& r) { return TrailingDims(r.shape); },
     [](const Request& r) { return ShapeString(r.shape); }},
    {"reduce op", Reduces,
     [](const Request& a, const Request& b) { return a.reduce_op == b.reduce_op; },
     [](const Request& r) { return std::string(ReduceOpName(r.reduce_op)); },
     [](const Request& r) { return std::string(ReduceOpName(r.reduce_op)); }},
    {"prescale factor", Reduces,
     [](const Request& a, const Request& b) { return a.prescale == b.prescale; },
     [](const Request& r) { return Scale(r.prescale); },
     [](const Request& r) { return Scale(r.prescale); }},
    {"postscale factor", Reduces,
     [](const Request& a, const Request& b) { return a.postscale == b.postscale; },
     [](const Request& r) { return Scale(r.postscale); },
     [](const Request& r) { return Scale(r.postscale); }},
    {"group", Always,
     [](const Request& a, const Request& b) {
       return a.group == b.group && a.group_size == b.group_size;
     },
     [](const Request& r) { return Group(r); }, [](const Request& r) { return Group(r); }},
    {"root rank", IsBroadcast, [](const Request& a, const Request& b) { return a.root == b.root; },
     [](const Request& r) { return std::to_string(r.root); },
     [](const Request& r) { return std::to_string(r.root); }},
};

// The first property the ranks disagree on, as "allreduce 'grad/fc1': shape mismatch:
// rank 0 has [3,4], rank 1 has [4,3]" (ranks that agree are grouped: "ranks 0,2 have"), or "".
std::string FindMismatch(const std::vector<Request>& by_rank) {
  const Request& first = by_rank.front();
  for (const Field& f : kFields) {
    if (!f.applies(first.op)) continue;
    bool all_same = true;
    for (size_t r = 1; r < by_rank.size() && all_same; ++r) all_same = f.same(first, by_rank[r]);
    if (all_same) continue;
    // Groups of ranks with the same key, in order of their first rank.
    std::vector<std::string> keys;
    std::vector<std::vector<int>> groups;
    for (const Request& r : by_rank) {
      const std::string k = f.key(r);
      size_t g = std::find(keys.begin(), keys.end(), k) - keys.begin();
      if (g == keys.size()) {
        keys.push_back(k);
        groups.emplace_back();
      }
      groups[g].push_back(r.rank);
    }
    if (groups.size() == 1) continue;
    std::string msg = OpLabel(first.op, first.name) + ": " + f.what +
                      " mismatch: ";
    for (size_t g = 0; g < groups.size(); ++g) {
      if (g) msg += ", ";
      msg += RanksPhrase(groups[g]) + (groups[g].size() == 1 ? " has " : " have ") +
             f.show(by_rank[groups[g][0]]);
    }
    return msg;
  }
  return "";
}

// Every rank's splits as a size x size matrix (row q: rows q sends to each rank), or why not:
// a rank's splits that do not cover its first dimension (a peer that skipped the submission
// check), or a received output too large.
std::string AlltoallSplits(const std::vector<Request>& by_rank, std::vector<int64_t>* matrix) {
  const size_t n = by_rank.size();
  const std::string what = "alltoall '" + by_rank.front().name + "': ";
  matrix->clear();
  for (const Request& r : by_rank) {
    const int64_t rows = r.shape.empty() ? 0 : r.shape[0];
    int64_t sum = 0;
    bool ok = r.splits.size() == n && !r.shape.empty();
    for (int64_t v : r.splits) ok = ok && v >= 0 && !__builtin_add_overflow(sum, v, &sum);
    if (!ok || sum != rows) {
      return what + "rank " + std::to_string(r.rank) + "'s splits do not cover its first " +
             "dimension " + std::to_string(rows) + " in " + std::to_string(n) + " entries";
    }
    matrix->insert(matrix->end(), r.splits.begin(), r.splits.end());
  }
  for (size_t dst = 0; dst < n; ++dst) {
    int64_t rows = 0;
    bool ok = true;
    for (size_t q = 0; q < n; ++q) ok = ok && !__builtin_add_overflow(rows, (*matrix)[q * n + dst], &rows);
    std::vector<int64_t> shape = by_rank.front().shape;
    shape[0] = rows;
    int64_t bytes = 0;
    if (!ok || !ShapeBytes(shape, by_rank.front().dtype, &bytes)) {
      return what + "rank " + std::to_string(dst) + "'s output would be larger than 2^63-1 bytes";
    }
  }
  return "";
}

}  // namespace

Response Coordinator::BuildWithJoined(const Entry& e) const {
  std::vector<Request> submitters;
  std::vector<int> absent;
  for (int r = 0; r < size_; ++r) {
    if (e.submitted[r]) {
      submitters.push_back(e.by_rank[r]);
    } else {
      absent.push_back(r);
    }
  }
  const Request& first = submitters.front();
  // A barrier takes the joined ranks along (they wait in join anyway); failing it would leave
  // its per-rank name counter behind on the joined ranks, and the next barrier would hang.
  if (first.op == OpType::kAllreduce || first.op == OpType::kBarrier) {
    return BuildResponse(submitters);
  }
  Response err;
  err.type = ResponseType::kError;
  err.names = {first.name};
  err.error_code = StatusCode::kInvalidArgument;
  const std::string op(OpTypeName(first.op));
  err.error = op + " '" + first.name + "': rank" + (absent.size() == 1 ? " " : "s ") +
              RankList(absent) + (absent.size() == 1 ? " has" : " have") +
              " joined and cannot take part in " + op;
  return err;
}

Response BuildResponse(const std::vector<Request>& by_rank) {
  const Request& first = by_rank.front();
  Response resp;
  resp.names = {first.name};
  for (const Request& req : by_rank) {
    if (req.refused.empty()) continue;
    resp.type = ResponseType::kError;
    resp.error_code = StatusCode::kInvalidArgument;
    resp.error = OpLabel(req.op, req.name) + ": rank " +
                 std::to_string(req.rank) + " refused it: " + req.refused;
    return resp;
  }
  std::string why = FindMismatch(by_rank);
  if (!why.empty()) {
    resp.type = ResponseType::kError;
    resp.error_code = StatusCode::kInvalidArgument;
    resp.error = std::move(why);
    return resp;
  }
  resp.dtype = first.dtype;
  resp.device = first.device;
  switch (first.op) {
    case OpType::kAllreduce:
    case OpType::kReducescatter:
      resp.type = first.op == OpType::kAllreduce ? ResponseType::kAllreduce
                                                 : ResponseType::kReducescatter;
      resp.reduce_op = first.reduce_op;
      resp.prescale = first.prescale;
      resp.postscale = first.postscale;
      resp.counts = {NumElements(first.shape)};
      break;
    case OpType::kAllgather: {
      resp.type = ResponseType::kAllgather;
      int64_t rows = 0;
      for (const Request& r : by_rank) {
        const int64_t d = r.shape.empty() ? 0 : r.shape[0];
        resp.first_dims.push_back(d);
        rows = __builtin_add_overflow(rows, d, &rows) ? -1 : rows;
      }
      std::vector<int64_t> out_shape = first.shape;
      int64_t bytes = 0;
      if (!out_shape.empty()) out_shape[0] = rows;
      if (rows < 0 || !ShapeBytes(out_shape, first.dtype, &bytes)) {
        resp.type = ResponseType::kError;
        resp.error_code = StatusCode::kInvalidArgument;
        resp.error = "allgather '" + first.name + "': the gathered output would be larger than " +
                     "2^63-1 bytes";
        resp.first_dims.clear();
      }
      break;
    }
    case OpType::kBroadcast:
      resp.type = ResponseType::kBroadcast;
      resp.root = first.root;
      break;
    case OpType::kAlltoall: {
      std::string why_not = AlltoallSplits(by_rank, &resp.splits);
      if (!why_not.empty()) {
        resp.type = ResponseType::kError;
        resp.error_code = StatusCode::kInvalidArgument;
        resp.error = std::move(why_not);
        resp.splits.clear();
      } else {
        resp.type = ResponseType::kAlltoall;
      }
      break;
    }
    case OpType::kBarrier:
      resp.type = ResponseType::kBarrier;
      break;
    case OpType::kJoin:  // Coordinator::Add takes joins out before they reach the table
      resp.type = ResponseType::kError;
      resp.error_code = StatusCode::kInternal;
      resp.error = "join '" + first.name + "': reached BuildResponse";
      break;
  }
  return resp;
}

}  // namespace kolo
