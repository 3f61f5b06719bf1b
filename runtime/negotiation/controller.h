// One negotiation round over the control communicator (Horovod's controller protocol, with its
// response cache):
//
//  1. Fast path (KOLO_CACHE_CAPACITY > 0). Every rank sorts its new Requests: a name negotiated
//     before with the same parameters is a cache hit and waits (`waiting_`); anything else is
//     uncached. One bitwise-AND all-reduce of [status | ready bits | valid bits] follows:
//       status  bit 0 "no rank needs the slow path" (no uncached Request, no shutdown, no join)
//               bit 1 "no rank has joined"
//               bit 2 "every rank's callers are blocked" (the deadlock check)
//               bit 3 "rank 0 records no timeline"
//               bit 4 "no rank holds a hit"
//       ready   bit i: cache slot i is a hit waiting here — AND = ready on every rank
//       valid   bit i cleared: a rank saw slot i's name with other parameters (or held the hit
//               too long for the stall inspector, or sent it to the deadlock check): every rank
//               erases the slot and sends its hit of that name the slow way.
//     Slots ready everywhere become Responses in slot order, the same on every rank.
//     Ready marks of hits (only while rank 0 records a timeline, runtime/timeline.h): when bits
//     3 and 4 are clear after the AND and nobody has joined, every rank sends its waiting-hit
//     bits to rank 0 in one fixed-size gather right after the AND (Communicator::GatherWords,
//     one MPI_Gather of capacity/64 words a rank). A hit waits with its bit set until every
//     rank has it, so rank 0 marks a rank's hit in the first gathered cycle its bit appears in
//     (HitMarks), at the time it received it: the slow path's marks are one cycle precise too.
//  2. Slow path, when any rank needs it (or there is no cache): every rank sends its uncached
//     Requests to the coordinator (rank 0), which records them, turns the names every rank has
//     now submitted into validated Responses and broadcasts the ResponseList. Each rank caches
//     the Responses (one tensor each) in list order, so slots stay equal everywhere.
//  3. Every rank fuses cache hits and broadcast Responses with the same rules
//     (fusion/planner.h): the same fused groups everywhere. Hits fuse only with hits; a fused
//     group of hits names its tensors by this rank's ids (Response::ids), with names only when
//     asked for (set_name_hits), so a cycle of hits copies no name.
//
// A cycle of hits costs per tensor: one lookup that compares two flat keys (RequestKey, made
// by the queue at submission, against the slot's), a bit set, a bit test after the AND, an LRU
// touch, and two push_backs into the fused group (docs/benchmarks.md, "Negotiation").
//
// While any rank has joined, nothing is cached or served from the cache: a joined rank has no
// Request of its own for the names its peers submit.
//
// Why the marks of hits cost what they cost. Rank 0 alone records a timeline, and starts and
// stops it at run time, so the other ranks cannot know from their own state whether to send
// their hits; every rank must still take part in the same calls in the same cycles. The AND
// that every cycle of hits runs anyway tells them, in the same word for all: rank 0 clears bit
// 3 while it has a RequestObserver installed (the Runtime installs the timeline for the cycle),
// every other rank always sets it. So with the timeline off the marks cost two status bits and
// no call. With it on, the gather runs only in cycles where some rank holds a hit (bit 4), and
// carries one bit per cache slot a rank to rank 0 only. The AND cannot carry the marks itself
// (it cannot tell ranks apart); an all-gather in place of the AND would save a call but send
// every rank's bits to every rank, and would have to be chosen a cycle ahead.
#ifndef KOLO_RUNTIME_NEGOTIATION_CONTROLLER_H_
#define KOLO_RUNTIME_NEGOTIATION_CONTROLLER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>

#include "collectives/communicator.h"
#include "fusion/planner.h"
#include "runtime/negotiation/coordinator.h"
#include "runtime/negotiation/deadlock.h"
#include "runtime/negotiation/hit_marks.h"
#include "protocol/message.h"
#include "runtime/negotiation/autotune.h"
#include "runtime/negotiation/request_key.h"
#include "runtime/negotiation/response_cache.h"
#include "runtime/negotiation/stall_inspector.h"

namespace kolo {

struct ControllerOptions {
  int64_t fusion_threshold_bytes = 128 << 20;
  int64_t fusion_direct_bytes = 64 << 10;
  // For host tensors (ResponseFuser::set_host_direct_bytes); -1: fusion_direct_bytes.
  int64_t fusion_host_direct_bytes = -1;
  int64_t cache_capacity = 1024;  // same on every rank
  StallOptions stall;
  double cycle_time_ms = 1.0;
  bool autotune = false;          // rank 0 tunes threshold and cycle time (runtime/negotiation/autotune.h)
  AutotuneOptions autotune_options;
};

// Counters for `kolo-bench --negotiation` and the C API's kolo_get_stats.
struct NegotiationStats {
  uint64_t cycles = 0;
  uint64_t slow_cycles = 0;     // cycles that gathered Requests at the coordinator
  uint64_t cache_hits = 0;      // Requests served from the cache
  uint64_t cache_misses = 0;    // cacheable Requests that were not cached
  uint64_t invalidations = 0;   // slots erased: parameters changed, a hit stalled or went to
                                // the deadlock check
  uint64_t negotiate_ns = 0;    // time spent in Negotiate
  uint64_t exchange_ns = 0;     // of which in the control plane's collectives (incl. waiting
                                // for the slowest rank)
  uint64_t fused_responses = 0;  // Responses that carried more than one tensor (fusion happened)
  uint64_t fused_tensors = 0;    // the tensors those carried
  int64_t fusion_threshold_bytes = 0;  // in force now (autotune changes it)
  double cycle_time_ms = 0;            // in force now
  bool autotune_done = false;          // rank 0: tuning finished (or never ran)
};

class Controller {
 public:
  Controller(Communicator& control, ControllerOptions options);

  // Collective over the control communicator. An error means the control plane itself failed
  // (a transport error); a malformed message from a peer becomes fatal_error in the result.
  // `mine`: this rank's new Requests, read during the call only (the background thread passes
  // the tensor queue's own, so that a cycle copies no Request it serves from the cache).
  // `keys`: RequestKey::Of each of `mine`, same order (TensorQueue::TakeNewRequests).
  StatusOr<ResponseList> Negotiate(const std::vector<const Request*>& mine,
                                   const std::vector<RequestKey>& keys, bool shutdown);
  StatusOr<ResponseList> Negotiate(const RequestList& mine);

  // Whether fused cache hits name their tensors (Response::names) besides their ids: off, a
  // hit costs no name copy, and execution finds tensors by id; the timeline needs names.
  void set_name_hits(bool on) { name_hits_ = on; }
  // Before Start: the direct size of host tensors (ControllerOptions::fusion_host_direct_bytes);
  // the same on every rank.
  void set_fusion_host_direct_bytes(int64_t bytes) { options_.fusion_host_direct_bytes = bytes; }

  // Whether every caller on this rank is blocked waiting for the operations named in `names`,
  // all still in negotiation (the deadlock check, runtime/negotiation/deadlock.h); kept until changed.
  void SetWaiting(bool blocked, std::vector<std::string> names) {
    blocked_ = blocked;
    blocked_on_ = std::move(names);
  }

  // Whether some of this rank's cache hits wait for their peers after the last Negotiate.
  bool has_waiting_hits() const { return any_waiting_; }

  NegotiationStats stats() const;
  // The cycle time in force (the configured one, or the autotuned one); read by the background
  // thread that calls Negotiate.
  double cycle_time_ms() const { return cycle_time_ms_; }
  // The autotuner's log (rank 0 with KOLO_AUTOTUNE=1): a clear error for an unwritable path.
  Status Start();

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr int kCoordinator = 0;
  static constexpr uint64_t kNoSlowPath = 1;
  static constexpr uint64_t kNoneJoined = 2;
  static constexpr uint64_t kAllBlocked = 4;  // set by a rank whose callers are all blocked
  static constexpr uint64_t kNoHitMarks = 8;    // cleared by rank 0 recording a timeline
  static constexpr uint64_t kNoneHolding = 16;  // cleared by a rank holding a hit
  // Cycles of hits in which every rank was blocked and nothing ran before the ranks take the
  // slow path with their waits, so that the coordinator can check for a deadlock.
  static constexpr int kBlockedCyclesBeforeCheck = 2;

  // Step 1: the AND-ed bits decide which hits run now (their slots go to `ready`, in slot
  // order); invalidated ones join `uncached`. `stale`: slots whose names this rank submitted
  // with other parameters.
  // *without_id: set when a ready hit has no Request::id.
  Status AgreeOnHits(bool shutdown, const std::vector<int>& stale, std::vector<Request>* uncached,
                     std::vector<int>* ready, bool* without_id, bool* any_slow,
                     bool* any_joined);
  // After the AND, when it says so (all ranks): the waiting hits go to rank 0, which reports
  // the new ones to its RequestObserver as ready marks.
  Status GatherHits();
  // Step 2 (all ranks).
  StatusOr<ResponseList> SlowPath(const RequestList& mine);
  // Coordinator's part of step 2.
  ResponseList Coordinate(const std::vector<std::string>& gathered);
  // After step 2: remember the Responses; hits whose slot was evicted go the slow way next.
  void CacheResponses(const std::vector<Response>& responses, bool any_joined);
  // A group goes one way: hits of a group with a member in `uncached` join it there.
  void MoveGroupsOfUncachedHits(std::vector<Request>* uncached);

  // The waiting hits, by slot. A hit's Request is the one its cache entry holds
  // (ResponseCache::request), so only the time it arrived and its id are kept.
  bool Waiting(int slot) const { return (waiting_[slot / 64] >> (slot % 64)) & 1; }
  void Hold(int slot, Clock::time_point since, int32_t id) {
    if (!any_waiting_) first_hold_ = since;
    any_waiting_ = true;
    waiting_[slot / 64] |= uint64_t{1} << (slot % 64);
    since_[slot] = since;
    hit_id_[slot] = id;
  }
  void Unhold(int slot) { waiting_[slot / 64] &= ~(uint64_t{1} << (slot % 64)); }
  // Unholds a hit that goes the slow way, with a copy of its Request (its entry stays put).
  Request Release(int slot) {
    Unhold(slot);
    Request r = cache_.request(slot);
    r.id = hit_id_[slot];
    return r;
  }
  // Calls f(slot) for each waiting hit, in slot order; f may Unhold(slot).
  template <typename F>
  void ForEachWaiting(F f) {
    for (size_t w = 0; w < waiting_.size(); ++w) {
      for (uint64_t bits = waiting_[w]; bits; bits &= bits - 1) {
        f(static_cast<int>(w * 64) + __builtin_ctzll(bits));
      }
    }
  }

  // All ranks: a setting announced in the ResponseList takes effect before this cycle's fusion.
  void ApplyTuned(const ResponseList& list);
  // Rank 0: feeds the cycle's all-reduce bytes to the autotuner.
  void Tune(const std::vector<Response>& responses);

  Communicator& control_;
  ControllerOptions options_;
  double cycle_time_ms_;
  std::unique_ptr<Autotuner> tuner_;       // rank 0 with autotune only
  std::optional<TunedParams> announce_;    // rank 0: to send in the next ResponseList
  Coordinator coordinator_;
  StallInspector stall_;
  ResponseCache cache_;
  // This rank's hits waiting for the peers: bit `slot` of waiting_ is set, and since_[slot] is
  // when the hit arrived. A bitmap over slots rather than a map of Requests, so that holding and
  // releasing a hit neither allocates nor moves a Request, and the walks over the waiting hits
  // are cheap and in slot order.
  std::vector<uint64_t> waiting_;
  std::vector<Clock::time_point> since_;
  // No hit held since first_hold_ has waited longer than it: while none has waited for
  // the stall inspector's hold limit, a cycle skips checking each one's since_. Reset when
  // nothing waits (conservative in between: never later than the oldest waiting hit).
  Clock::time_point first_hold_;
  bool any_waiting_ = false;
  std::vector<int32_t> hit_id_;  // per slot: the waiting hit's Request::id (execution uses it)
  // Per-cycle scratch, kept so that a cycle allocates nothing for them.
  struct Grouped {  // a member of a group, settled once the whole group's lookups are known
    size_t index;    // in the cycle's Requests
    ResponseCache::Lookup lookup;
    int slot;
  };
  std::vector<Grouped> grouped_;
  std::vector<uint64_t> words_;    // the AND-ed status | ready | valid bits
  std::vector<uint64_t> held_;     // rank 0: every rank's waiting hits (GatherHits)
  HitMarks hit_marks_;             // rank 0: the hits already marked
  std::vector<int> ready_slots_;   // hits ready on every rank, in slot order
  std::unordered_map<std::string, Request> sent_;     // uncached Requests awaiting a Response
  std::vector<Request> deferred_;  // hits whose slot was evicted: sent the slow way next cycle
  bool joined_ = false;            // this rank has sent a join that has not completed
  bool name_hits_ = false;
  // The deadlock check: this rank's waits (SetWaiting), whether the last AND found every rank
  // blocked, for how many cycles in a row with nothing to run, and the coordinator's detector.
  bool blocked_ = false;
  std::vector<std::string> blocked_on_;
  bool all_blocked_ = false;
  int blocked_cycles_ = 0;
  DeadlockDetector deadlock_;
  NegotiationStats stats_;
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_NEGOTIATION_CONTROLLER_H_
