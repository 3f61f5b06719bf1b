#include "runtime/negotiation/coordinator.h"

#include <algorithm>

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
    why += RanksPhrase(ranks[i]) + " grouped " + std::to_string(lists[i].size()) +
           (lists[i].size() == 1 ? " tensor (" : " tensors (");
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

}  // namespace kolo
