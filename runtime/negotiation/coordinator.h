// The coordinator's bookkeeping (rank 0), as pure logic so it is unit-tested without MPI:
// the message table counts which ranks have submitted each name; when all have, the name's
// Requests are validated against each other and turned into one Response (or an error
// Response naming the tensor, the ranks and both values). Horovod's controller.h protocol.
//
// Join (Horovod's): a rank that ran out of data sends a kJoin Request. From then until every
// rank has joined, a name is ready once every rank has submitted it or joined. An allreduce
// ready with joined non-submitters is a normal allreduce Response built from the submitters'
// Requests (the joined ranks contribute the identity); a barrier includes the joined ranks;
// any other operation fails on its submitters ("<op> '<name>': rank(s) r joined and cannot take part in <op>"). When the last
// rank joins, every pending name is ready (each rank submitted or joined); after their
// Responses comes a kJoin Response with `root` = the last rank to join, and the joined set is
// cleared.
#ifndef KOLO_RUNTIME_NEGOTIATION_COORDINATOR_H_
#define KOLO_RUNTIME_NEGOTIATION_COORDINATOR_H_

#include <chrono>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/rank_list.h"
#include "protocol/message.h"

namespace kolo {

// Told, on the coordinator, when a rank's Request arrives: the timeline's ready marks. The
// Controller owns the Coordinator, so an observer is installed per thread, for a scope: the
// Runtime wraps its negotiation in a ScopedRequestObserver on its background thread (in the
// thread world, each rank's own thread). The Controller reports cache hits here too (their
// Requests never reach the Coordinator), and takes an installed observer on rank 0 as the sign
// that they are wanted (controller.h).
class RequestObserver {
 public:
  virtual ~RequestObserver() = default;
  // `request`: the one the rank sent, or for a cache hit the cached Request (rank 0's, with the
  // same name and parameters), reported in the cycle in which rank 0 learned of the hit.
  virtual void RequestArrived(const Request& request, int rank) = 0;
};

// The observer installed on this thread, or nullptr.
RequestObserver* CurrentRequestObserver();

class ScopedRequestObserver {
 public:
  explicit ScopedRequestObserver(RequestObserver* observer);  // nullptr: none in the scope
  ~ScopedRequestObserver();
  ScopedRequestObserver(const ScopedRequestObserver&) = delete;
  ScopedRequestObserver& operator=(const ScopedRequestObserver&) = delete;

 private:
  RequestObserver* previous_;
};

class Coordinator {
 public:
  explicit Coordinator(int size);

  // Records `list`, received from `from_rank`. Requests are taken in order; each one accepted
  // is reported to this thread's RequestObserver, if any.
  void Add(const RequestList& list, int from_rank);

  // Responses for every name that all ranks have now submitted, in the order in which names
  // became ready; those names leave the table.
  std::vector<Response> TakeReady();

  bool shutdown_requested() const { return shutdown_rank_ >= 0; }
  int shutdown_rank() const { return shutdown_rank_; }
  // Names some but not all ranks have submitted (for diagnostics).
  size_t pending() const { return table_.size(); }
  // Ranks that have joined and wait for the others, in join order.
  const std::vector<int>& joined() const { return join_order_; }

  // A name some ranks have submitted and others have neither submitted nor joined for.
  struct Waiting {
    std::string name;
    OpType op;
    std::string group;         // its group's key, or "" (not grouped)
    std::vector<int> ready;    // ranks that submitted it
    std::vector<int> missing;  // ranks that did not (and have not joined)
    std::chrono::steady_clock::time_point since;  // when the first rank's Request arrived
  };
  // Every name not yet ready, in order of first submission.
  std::vector<Waiting> Pending() const;
  // Takes a name out of the table and returns the error Responses this produces (the stall
  // inspector's shutdown): one for the name, or, for a member of a group, the whole group's
  // once its other members are ready (none until then).
  std::vector<Response> Fail(const std::string& name, StatusCode code, const std::string& error);

 private:
  struct Entry {
    std::vector<Request> by_rank;    // indexed by rank, valid where submitted[r]
    std::vector<bool> submitted;
    int count = 0;
    std::string duplicate_error;     // a rank submitted the name twice
    uint64_t seq = 0;                // order of first submission
    bool queued = false;             // in ready_
    std::chrono::steady_clock::time_point since;
  };

  // What the coordinator has seen of one group key (a grouped operation's first member's name)
  // from each rank, to tell when every rank's whole group has arrived (the ranks' members may
  // come in several lists) and whether the ranks grouped the same names.
  struct GroupSeen {
    std::vector<int32_t> size;                   // per rank: its group_size; 0 = nothing yet
    std::vector<std::vector<std::string>> names; // per rank: its members that arrived
  };

  // Every rank has submitted the name or joined.
  bool Complete(const Entry& e) const;
  // Records a grouped Request of `rank`; once every rank that has not joined has sent its whole
  // group, fails the group when the ranks' member names differ (see FailGroup).
  void AddGroupMember(const Request& req, int rank);
  void SettleGroup(const std::string& key);
  // Every member of `key`'s group any rank sent fails on every rank: a member that only some
  // ranks grouped would otherwise wait forever for the others.
  void FailGroup(const std::string& key, const GroupSeen& seen);
  void AddJoin(int rank);
  // The Response of a ready name whose non-submitters have all joined.
  Response BuildWithJoined(const Entry& e) const;
  // Appends `r` to `out`, or holds it until every member of its group is ready; a group is
  // released all-or-nothing: if one member failed, every member fails.
  void Emit(Response r, const Request& first, std::vector<Response>* out);

  const int size_;
  std::unordered_map<std::string, Entry> table_;
  std::deque<std::string> ready_;
  int shutdown_rank_ = -1;
  uint64_t next_seq_ = 0;
  std::vector<bool> joined_;      // indexed by rank
  std::vector<int> join_order_;   // joined ranks, in join order
  std::unordered_map<std::string, std::vector<Response>> held_;  // group key -> ready members
  std::unordered_map<std::string, GroupSeen> groups_;  // group key -> what arrived, until settled
  std::vector<Response> failed_groups_;                // emitted first by the next TakeReady
};

// Validates the Requests of one name (one per rank, index = rank) and builds its Response.
Response BuildResponse(const std::vector<Request>& by_rank);

}  // namespace kolo

#endif  // KOLO_RUNTIME_NEGOTIATION_COORDINATOR_H_
