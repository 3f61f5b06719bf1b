#include "runtime/negotiation/deadlock.h"

#include <algorithm>
#include <map>
#include <set>

namespace kolo {
namespace {

const Coordinator::Waiting* Find(const std::vector<Coordinator::Waiting>& pending,
                                 const std::string& name) {
  for (const Coordinator::Waiting& w : pending) {
    if (w.name == name) return &w;
  }
  return nullptr;
}

// "x" for kolo.torch's "allreduce.x" (Horovod's names: the collective, a dot, the user's name),
// else the name itself.
std::string UserName(const Coordinator::Waiting& w) {
  const std::string prefix = std::string(OpTypeName(w.op)) + ".";
  return w.name.compare(0, prefix.size(), prefix) == 0 ? w.name.substr(prefix.size()) : w.name;
}

}  // namespace

std::string DeadlockDetector::Describe(const std::vector<RequestList>& lists,
                                       const std::vector<Coordinator::Waiting>& pending) {
  // The same user name under different collectives: "'x': rank 0 called allreduce, ranks 1,2
  // called allgather".
  std::map<std::string, std::vector<const Coordinator::Waiting*>> by_user_name;
  std::set<std::string> waited;
  for (const RequestList& l : lists) waited.insert(l.waiting.begin(), l.waiting.end());
  for (const std::string& name : waited) {
    if (const Coordinator::Waiting* w = Find(pending, name)) by_user_name[UserName(*w)].push_back(w);
  }
  std::string out;
  for (const auto& [user, ws] : by_user_name) {
    bool differ = false;
    for (const auto* w : ws) differ = differ || w->op != ws.front()->op;
    if (!differ) continue;
    out += "'" + user + "': ";
    for (size_t i = 0; i < ws.size(); ++i) {
      out += (i ? ", " : "") + RanksPhrase(ws[i]->ready) + " called " +
             std::string(OpTypeName(ws[i]->op));
    }
    out += "; ";
  }
  // "deadlock: rank 0 waits for allreduce 'a' (not submitted by ranks 1,2), ranks 1,2 wait
  // for allreduce 'b' (not submitted by rank 0)"
  out += "deadlock: every rank waits for an operation that cannot complete: ";
  std::vector<std::vector<std::string>> seen;
  std::vector<std::vector<int>> ranks;
  for (size_t r = 0; r < lists.size(); ++r) {
    std::vector<std::string> w = lists[r].waiting;
    std::sort(w.begin(), w.end());
    size_t i = std::find(seen.begin(), seen.end(), w) - seen.begin();
    if (i == seen.size()) {
      seen.push_back(w);
      ranks.emplace_back();
    }
    ranks[i].push_back(static_cast<int>(r));
  }
  for (size_t i = 0; i < seen.size(); ++i) {
    out += (i ? ", " : "") + RanksPhrase(ranks[i]) +
           (ranks[i].size() == 1 ? " waits for " : " wait for ");
    constexpr size_t kShown = 4;
    for (size_t j = 0; j < seen[i].size() && j < kShown; ++j) {
      const Coordinator::Waiting* w = Find(pending, seen[i][j]);
      out += (j ? ", " : "") + std::string(w ? OpTypeName(w->op) : "operation") + " '" +
             seen[i][j] + "'";
      if (w) out += " (not submitted by " + RanksPhrase(w->missing) + ")";
    }
    if (seen[i].size() > kShown) out += " and " + std::to_string(seen[i].size() - kShown) + " more";
  }
  return out;
}

std::vector<Response> DeadlockDetector::Observe(Coordinator& coordinator,
                                                const std::vector<RequestList>& lists,
                                                bool progressed) {
  bool holds = !progressed && coordinator.joined().empty() && !lists.empty();
  for (const RequestList& l : lists) holds = holds && l.blocked && !l.waiting.empty();
  std::vector<Coordinator::Waiting> pending;
  if (holds) {
    pending = coordinator.Pending();
    for (size_t r = 0; r < lists.size() && holds; ++r) {
      for (const std::string& name : lists[r].waiting) {
        const Coordinator::Waiting* w = Find(pending, name);
        // Pending here, and this rank is one of its submitters: it cannot complete while the
        // missing ranks wait for something else.
        holds = holds && w && std::count(w->ready.begin(), w->ready.end(), static_cast<int>(r));
      }
    }
  }
  stuck_ = holds ? stuck_ + 1 : 0;
  if (stuck_ < kCycles) return {};
  stuck_ = 0;
  const std::string why = Describe(lists, pending);
  std::set<std::string> names;
  for (const RequestList& l : lists) names.insert(l.waiting.begin(), l.waiting.end());
  // A waited-for member of a group fails with its whole group (all-or-nothing).
  std::set<std::string> groups;
  for (const Coordinator::Waiting& w : pending) {
    if (names.count(w.name) && !w.group.empty()) groups.insert(w.group);
  }
  for (const Coordinator::Waiting& w : pending) {
    if (!w.group.empty() && groups.count(w.group)) names.insert(w.name);
  }
  std::vector<Response> out;
  for (const std::string& name : names) {
    const Coordinator::Waiting* w = Find(pending, name);
    const std::string op = w ? std::string(OpTypeName(w->op)) : "operation";
    for (Response& r : coordinator.Fail(name, StatusCode::kDeadlineExceeded,
                                        op + " '" + name + "': " + why)) {
      out.push_back(std::move(r));
    }
  }
  return out;
}

}  // namespace kolo
