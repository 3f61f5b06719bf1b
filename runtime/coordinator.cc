#include "runtime/coordinator.h"

#include <algorithm>
#include <sstream>

namespace kolo {
namespace {
thread_local RequestObserver* t_request_observer = nullptr;
}  // namespace

ScopedRequestObserver::ScopedRequestObserver(RequestObserver* observer)
    : previous_(t_request_observer) {
  t_request_observer = observer;
}

ScopedRequestObserver::~ScopedRequestObserver() { t_request_observer = previous_; }

RequestObserver* CurrentRequestObserver() { return t_request_observer; }

Coordinator::Coordinator(int size) : size_(size), joined_(size, false) {}

bool Coordinator::Complete(const Entry& e) const {
  if (e.count == size_) return true;
  if (join_order_.empty()) return false;
  for (int r = 0; r < size_; ++r) {
    if (!e.submitted[r] && !joined_[r]) return false;
  }
  return true;
}

void Coordinator::AddJoin(int rank) {
  if (joined_[rank]) {
    // Runtime::Join refuses a second join while one is pending; a peer that sent one anyway
    // is ignored rather than trusted.
    return;
  }
  joined_[rank] = true;
  join_order_.push_back(rank);
  // Names that waited only for this rank are ready now, in the order they were first submitted.
  std::vector<std::pair<uint64_t, const std::string*>> now_ready;
  for (auto& [name, e] : table_) {
    if (!e.queued && Complete(e)) {
      e.queued = true;
      now_ready.emplace_back(e.seq, &name);
    }
  }
  std::sort(now_ready.begin(), now_ready.end());
  for (const auto& [seq, name] : now_ready) ready_.push_back(*name);
  // A group may have waited only for this rank's members.
  std::vector<std::string> keys;
  for (const auto& [key, seen] : groups_) keys.push_back(key);
  for (const std::string& key : keys) SettleGroup(key);
}

void Coordinator::Add(const RequestList& list, int from_rank) {
  if (list.shutdown && shutdown_rank_ < 0) shutdown_rank_ = from_rank;
  for (const Request& req : list.requests) {
    const int r = from_rank;
    if (req.op == OpType::kJoin) {
      if (t_request_observer) t_request_observer->RequestArrived(req, r);
      AddJoin(r);
      continue;
    }
    // Refused because this rank had joined, but its join has completed since: no rank can be
    // waiting for it any more.
    if (req.refused == kRefusedJoined && !joined_[r]) continue;
    Entry& e = table_[req.name];
    if (e.by_rank.empty()) {
      e.by_rank.resize(size_);
      e.submitted.assign(size_, false);
      e.seq = next_seq_++;
      e.since = std::chrono::steady_clock::now();
    }
    if (e.submitted[r]) {
      // The enqueue check makes this impossible for a correct peer; report it, don't crash.
      e.duplicate_error = OpLabel(req.op, req.name) +
                          "': submitted twice by rank " + std::to_string(r) +
                          " before it completed";
      continue;
    }
    e.by_rank[r] = req;
    e.by_rank[r].rank = r;
    e.submitted[r] = true;
    ++e.count;
    if (t_request_observer) t_request_observer->RequestArrived(req, r);
    if (!e.queued && Complete(e)) {
      e.queued = true;
      ready_.push_back(req.name);
    }
    if (!req.group.empty()) AddGroupMember(req, r);  // last: it may take `e` out of the table
  }
}

void Coordinator::AddGroupMember(const Request& req, int rank) {
  auto it = groups_.find(req.group);
  if (it != groups_.end() && it->second.size[rank] > 0 &&
      static_cast<int32_t>(it->second.names[rank].size()) >= it->second.size[rank]) {
    // This rank sent its whole group under this key before: this is the key's next group, and
    // what is left of the last one (a group some rank sent ungrouped, after a refusal) is stale.
    groups_.erase(it);
    it = groups_.end();
  }
  if (it == groups_.end()) {
    it = groups_.emplace(req.group, GroupSeen{}).first;
    it->second.size.assign(size_, 0);
    it->second.names.resize(size_);
  }
  GroupSeen& g = it->second;
  g.size[rank] = std::max(req.group_size, 1);
  g.names[rank].push_back(req.name);
  SettleGroup(req.group);
}

void Coordinator::SettleGroup(const std::string& key) {
  auto it = groups_.find(key);
  if (it == groups_.end()) return;
  const GroupSeen& g = it->second;
  std::vector<int> senders;
  for (int r = 0; r < size_; ++r) {
    if (joined_[r]) continue;
    if (g.size[r] == 0 || static_cast<int32_t>(g.names[r].size()) < g.size[r]) return;
    senders.push_back(r);
  }
  // Every rank that has not joined sent its whole group: the group is what it is now.
  bool same = true;
  if (!senders.empty()) {
    std::vector<std::string> first = g.names[senders[0]];
    std::sort(first.begin(), first.end());
    for (size_t i = 1; i < senders.size() && same; ++i) {
      std::vector<std::string> other = g.names[senders[i]];
      std::sort(other.begin(), other.end());
      same = other == first;
    }
  }
  GroupSeen seen = std::move(it->second);
  groups_.erase(it);
  if (!same) FailGroup(key, seen);
}

void Coordinator::FailGroup(const std::string& key, const GroupSeen& seen) {
  // "ranks 0,1 grouped 2 tensors ('g.0', 'g.1'), rank 2 grouped 3 ('g.0', 'g.1', 'g.2')"
  std::vector<std::vector<std::string>> lists;
  std::vector<std::vector<int>> ranks;
  std::vector<std::string> all;  // every member any rank sent, in order of first sight
  for (int r = 0; r < size_; ++r) {
    if (seen.size[r] == 0) continue;
    std::vector<std::string> sorted = seen.names[r];
    std::sort(sorted.begin(), sorted.end());
    size_t i = std::find(lists.begin(), lists.end(), sorted) - lists.begin();
    if (i == lists.size()) {
      lists.push_back(sorted);
      ranks.emplace_back();
    }
    ranks[i].push_back(r);
    for (const std::string& n : seen.names[r]) {
      if (std::find(all.begin(), all.end(), n) == all.end()) all.push_back(n);
    }
  }
  std::string why = "the ranks grouped different tensors with '" + key + "': ";
  for (size_t i = 0; i < lists.size(); ++i) {
    if (i) why += ", ";
    why += (ranks[i].size() == 1 ? "rank " : "ranks ") + RankList(ranks[i]) + " grouped " +
           std::to_string(lists[i].size()) + (lists[i].size() == 1 ? " tensor (" : " tensors (");
    constexpr size_t kShown = 8;
    for (size_t j = 0; j < lists[i].size() && j < kShown; ++j) {
      why += (j ? ", '" : "'") + lists[i][j] + "'";
    }
    if (lists[i].size() > kShown) why += ", ...";
    why += ")";
  }
  std::vector<Response> held;
  if (auto h = held_.find(key); h != held_.end()) {
    held = std::move(h->second);
    held_.erase(h);
  }
  for (const std::string& name : all) {
    std::string op = "grouped operation";
    if (auto t = table_.find(name); t != table_.end()) {
      const Entry& e = t->second;
      op = OpTypeName(e.by_rank[std::find(e.submitted.begin(), e.submitted.end(), true) -
                                e.submitted.begin()].op);
      table_.erase(t);  // a stale copy in ready_ is skipped by TakeReady
    } else {
      auto m = std::find_if(held.begin(), held.end(),
                            [&](const Response& r) { return r.names[0] == name; });
      if (m == held.end()) continue;  // released already (a mismatch of its own failed it)
      held.erase(m);
    }
    Response err;
    err.type = ResponseType::kError;
    err.names = {name};
    err.error_code = StatusCode::kInvalidArgument;
    err.error = op + " '" + name + "': " + why;
    failed_groups_.push_back(std::move(err));
  }
}

std::vector<Response> Coordinator::TakeReady() {
  std::vector<Response> out = std::move(failed_groups_);
  failed_groups_.clear();
  out.reserve(out.size() + ready_.size());
  while (!ready_.empty()) {
    auto it = table_.find(ready_.front());
    ready_.pop_front();
    if (it == table_.end()) continue;
    const Entry& e = it->second;
    const Request first = e.by_rank[std::find(e.submitted.begin(), e.submitted.end(), true) -
                                    e.submitted.begin()];
    Response resp;
    if (!e.duplicate_error.empty()) {
      resp.type = ResponseType::kError;
      resp.names = {it->first};
      resp.error_code = StatusCode::kInvalidArgument;
      resp.error = e.duplicate_error;
    } else if (e.count == size_) {
      resp = BuildResponse(e.by_rank);
    } else {
      resp = BuildWithJoined(e);
    }
    table_.erase(it);
    Emit(std::move(resp), first, &out);
  }
  if (shutdown_requested()) {
    // The job ends; a name some rank refused fails with that refusal on every rank that has
    // submitted it, not with the shutdown that overtook it (the refusing rank often shuts down
    // right after: its caller saw the error). Names are in no particular order here, so they
    // are sorted: every rank must see the same list.
    std::vector<std::pair<uint64_t, std::string>> refused;
    for (const auto& [name, e] : table_) {
      for (int r = 0; r < size_; ++r) {
        if (e.submitted[r] && !e.by_rank[r].refused.empty()) {
          refused.emplace_back(e.seq, name);
          break;
        }
      }
    }
    std::sort(refused.begin(), refused.end());
    for (const auto& [seq, name] : refused) {
      const Entry& e = table_.at(name);
      for (int r = 0; r < size_; ++r) {
        if (!e.submitted[r] || e.by_rank[r].refused.empty()) continue;
        Response err;
        err.type = ResponseType::kError;
        err.names = {name};
        err.error_code = StatusCode::kInvalidArgument;
        err.error = OpLabel(e.by_rank[r].op, name) + ": rank " +
                    std::to_string(r) + " refused it: " + e.by_rank[r].refused;
        out.push_back(std::move(err));
        break;
      }
      table_.erase(name);
    }
  }
  if (!join_order_.empty() && static_cast<int>(join_order_.size()) == size_) {
    // Every pending name became ready when the last rank joined, so the table is empty.
    Response done;
    done.type = ResponseType::kJoin;
    done.root = join_order_.back();
    out.push_back(std::move(done));
    join_order_.clear();
    joined_.assign(size_, false);
  }
  return out;
}

std::vector<Coordinator::Waiting> Coordinator::Pending() const {
  std::vector<std::pair<uint64_t, Waiting>> found;
  for (const auto& [name, e] : table_) {
    if (e.queued) continue;
    Waiting w;
    w.name = name;
    w.since = e.since;
    for (int r = 0; r < size_; ++r) {
      if (e.submitted[r]) {
        w.ready.push_back(r);
        w.op = e.by_rank[r].op;
        w.group = e.by_rank[r].group;
      } else if (!joined_[r]) {
        w.missing.push_back(r);
      }
    }
    found.emplace_back(e.seq, std::move(w));
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Waiting> out;
  out.reserve(found.size());
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

std::vector<Response> Coordinator::Fail(const std::string& name, StatusCode code,
                                        const std::string& error) {
  std::vector<Response> out;
  auto it = table_.find(name);
  if (it == table_.end()) return out;
  const Entry& e = it->second;
  const Request first = e.by_rank[std::find(e.submitted.begin(), e.submitted.end(), true) -
                                  e.submitted.begin()];
  table_.erase(it);
  if (!first.group.empty()) groups_.erase(first.group);
  Response err;
  err.type = ResponseType::kError;
  err.names = {name};
  err.error_code = code;
  err.error = error;
  Emit(std::move(err), first, &out);
  return out;
}

void Coordinator::Emit(Response r, const Request& first, std::vector<Response>* out) {
  if (first.group_size <= 1) {
    out->push_back(std::move(r));
    return;
  }
  std::vector<Response>& members = held_[first.group];
  members.push_back(std::move(r));
  if (static_cast<int32_t>(members.size()) < first.group_size) return;
  const Response* failed = nullptr;
  for (const Response& m : members) {
    if (m.type == ResponseType::kError && !failed) failed = &m;
  }
  if (failed) {
    const std::string why = "grouped with '" + failed->names[0] + "', which failed: " +
                            failed->error;
    const StatusCode code = failed->error_code;
    for (Response& m : members) {
      if (m.type == ResponseType::kError) continue;
      Response err;
      err.type = ResponseType::kError;
      err.names = m.names;
      err.error_code = code;
      err.error = OpLabel(first.op, m.names[0]) + ": " + why;
      m = std::move(err);
    }
  }
  for (Response& m : members) out->push_back(std::move(m));
  held_.erase(first.group);
}

std::string RankList(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(ranks[i]);
    if (j > i) out += (j == i + 1 ? "," : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

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
      msg += (groups[g].size() == 1 ? "rank " : "ranks ") + RankList(groups[g]) +
             (groups[g].size() == 1 ? " has " : " have ") + f.show(by_rank[groups[g][0]]);
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
