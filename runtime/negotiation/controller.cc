#include "runtime/negotiation/controller.h"

#include <algorithm>

#include "fusion/planner.h"
#include "runtime/wire/wire.h"

namespace kolo {
namespace {

uint64_t Nanos(std::chrono::steady_clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

}  // namespace

Controller::Controller(Communicator& control, ControllerOptions options)
    : control_(control),
      options_(options),
      coordinator_(control.Size()),
      stall_(options.stall),
      cache_(options.cache_capacity > 0 ? static_cast<size_t>(options.cache_capacity) : 0),
      waiting_((cache_.capacity() + 63) / 64, 0),
      since_(cache_.capacity()),
      hit_id_(cache_.capacity(), -1) {
  cycle_time_ms_ = options_.cycle_time_ms;
  if (options_.autotune && control_.Rank() == kCoordinator) {
    tuner_ = std::make_unique<Autotuner>(
        options_.autotune_options,
        TunedParams{options_.fusion_threshold_bytes, options_.cycle_time_ms});
    announce_ = tuner_->current();
  }
}

NegotiationStats Controller::stats() const {
  NegotiationStats s = stats_;
  s.fusion_threshold_bytes = options_.fusion_threshold_bytes;
  s.cycle_time_ms = cycle_time_ms_;
  s.autotune_done = !tuner_ || tuner_->done();
  return s;
}

Status Controller::Start() { return tuner_ ? tuner_->Open() : Status::OK(); }

void Controller::ApplyTuned(const ResponseList& list) {
  if (list.tuned_fusion_threshold_bytes >= 0) {
    options_.fusion_threshold_bytes = list.tuned_fusion_threshold_bytes;
  }
  if (list.tuned_cycle_time_ms >= 0) cycle_time_ms_ = list.tuned_cycle_time_ms;
}

void Controller::Tune(const std::vector<Response>& responses) {
  if (!tuner_ || tuner_->done()) return;
  int64_t bytes = 0;
  for (const Response& r : responses) {
    if (r.type == ResponseType::kAllreduce) bytes += ResponseBytes(r);
  }
  if (bytes == 0) return;
  auto next = tuner_->Record(bytes, Clock::now());
  if (next) announce_ = *next;
}

StatusOr<ResponseList> Controller::Negotiate(const RequestList& mine) {
  std::vector<const Request*> pointers;
  std::vector<RequestKey> keys;
  pointers.reserve(mine.requests.size());
  keys.reserve(mine.requests.size());
  for (const Request& r : mine.requests) {
    pointers.push_back(&r);
    keys.push_back(RequestKey::Of(r));
  }
  return Negotiate(pointers, keys, mine.shutdown);
}

StatusOr<ResponseList> Controller::Negotiate(const std::vector<const Request*>& mine,
                                             const std::vector<RequestKey>& keys,
                                             bool shutdown) {
  const auto start = Clock::now();
  ++stats_.cycles;
  std::vector<Request> uncached;
  uncached.swap(deferred_);
  std::vector<int> stale;
  const size_t count = mine.size();
  // A hit waits for the peers; anything else goes to the coordinator.
  auto settle = [&](size_t i, ResponseCache::Lookup lookup, int slot) {
    const RequestKey& k = keys[i];
    if (lookup == ResponseCache::Lookup::kHit && Waiting(slot)) {
      // Cannot happen (a name is in flight once, a slot holds one name); never drop a Request.
      lookup = ResponseCache::Lookup::kMiss;
    }
    switch (lookup) {
      case ResponseCache::Lookup::kHit:
        ++stats_.cache_hits;
        Hold(slot, start, k.id);
        break;
      case ResponseCache::Lookup::kStale:
        stale.push_back(slot);
        [[fallthrough]];
      case ResponseCache::Lookup::kMiss:
        if (cache_.enabled() && k.cacheable) ++stats_.cache_misses;
        uncached.push_back(*mine[i]);
        break;
    }
  };
  // The keys, in one array, are what a cycle of hits reads; a Request only when it misses.
  // Members of groups are settled after the others, once it is known whether all hit.
  grouped_.clear();
  for (size_t i = 0; i < count; ++i) {
    const RequestKey& k = keys[i];
    if (k.op == OpType::kJoin) joined_ = true;
    ResponseCache::Lookup lookup = ResponseCache::Lookup::kMiss;
    int slot = -1;
    if (cache_.enabled() && k.cacheable) lookup = cache_.Find(k, *mine[i], &slot);
    if (k.group_size > 1) {
      grouped_.push_back(Grouped{i, lookup, slot});
    } else {
      settle(i, lookup, slot);
    }
  }
  if (!grouped_.empty()) {
    std::unordered_map<std::string, bool> all_hit;  // group key -> every member hit
    for (const Grouped& g : grouped_) {
      auto it = all_hit.emplace(mine[g.index]->group, true).first;
      it->second = it->second && g.lookup == ResponseCache::Lookup::kHit;
    }
    for (const Grouped& g : grouped_) {
      // A group goes one way: when one member cannot be served from the cache, none is, and
      // the others' slots are invalidated so that every rank sends this group the slow way.
      const bool demote =
          g.lookup == ResponseCache::Lookup::kHit && !all_hit[mine[g.index]->group];
      settle(g.index, demote ? ResponseCache::Lookup::kStale : g.lookup, g.slot);
    }
  }

  bool any_slow = true;
  bool any_joined = joined_;
  bool without_id = false;  // a ready hit has no Request::id: fused hits need names then
  ready_slots_.clear();
  if (cache_.enabled()) {
    KOLO_RETURN_IF_ERROR(AgreeOnHits(shutdown, stale, &uncached, &ready_slots_, &without_id,
                                     &any_slow, &any_joined));
  }
  ResponseList result;
  if (any_slow) {
    ++stats_.slow_cycles;
    if (cache_.enabled()) {
      for (const Request& r : uncached) {
        if (ResponseCache::Cacheable(r)) sent_[r.name] = r;
      }
    }
    RequestList list;
    list.requests = std::move(uncached);
    list.shutdown = shutdown;
    list.blocked = blocked_;
    if (blocked_) list.waiting = blocked_on_;
    auto slow = SlowPath(list);
    if (!slow.ok()) return slow.status();
    result = std::move(*slow);
    ApplyTuned(result);  // before fusing: a tuned threshold applies to this cycle
  }
  // Cache hits first, in slot order, then the coordinator's Responses, each naming one tensor,
  // fused as they are added. The hits are read from the cache before CacheResponses can give
  // their slots to other names.
  ResponseFuser fused(options_.fusion_threshold_bytes, options_.fusion_direct_bytes,
                      ready_slots_.size() + result.responses.size());
  if (options_.fusion_host_direct_bytes >= 0) {
    fused.set_host_direct_bytes(options_.fusion_host_direct_bytes);
  }
  const bool with_names = name_hits_ || without_id;
  fused.AddHits(
      ready_slots_, cache_.fusion_keys(), hit_id_.data(), with_names,
      [&](int slot) -> const Response& { return cache_.response(slot); },
      [&](int slot) -> const std::string& { return cache_.name(slot); });
  if (any_slow) {
    if (cache_.enabled()) CacheResponses(result.responses, any_joined);
    for (Response& r : result.responses) {
      if (r.type == ResponseType::kJoin) joined_ = false;  // every rank has joined
      fused.Add(std::move(r));
    }
  }
  result.responses = fused.Take();
  for (const Response& r : result.responses) {
    if (r.NumTensors() > 1) {
      ++stats_.fused_responses;
      stats_.fused_tensors += r.NumTensors();
    }
  }
  blocked_cycles_ = all_blocked_ && !any_joined && result.responses.empty() ? blocked_cycles_ + 1 : 0;
  any_waiting_ = std::any_of(waiting_.begin(), waiting_.end(), [](uint64_t w) { return w != 0; });
  Tune(result.responses);
  stats_.negotiate_ns += Nanos(Clock::now() - start);
  return result;
}

Status Controller::AgreeOnHits(bool shutdown, const std::vector<int>& stale,
                               std::vector<Request>* uncached, std::vector<int>* ready,
                               bool* without_id, bool* any_slow, bool* any_joined) {
  const size_t capacity = cache_.capacity();
  const size_t n = waiting_.size();
  words_.assign(1 + 2 * n, 0);
  uint64_t* ready_bits = words_.data() + 1;
  uint64_t* valid_bits = words_.data() + 1 + n;
  std::fill(valid_bits, valid_bits + n, ~uint64_t{0});
  auto clear = [](uint64_t* bits, int slot) { bits[slot / 64] &= ~(uint64_t{1} << (slot % 64)); };
  for (int slot : stale) clear(valid_bits, slot);
  // A hit the peers have not matched for long goes to the coordinator, where the stall
  // inspector can see which ranks are missing.
  const auto now = Clock::now();
  const auto hold_limit = stall_.HoldLimit();
  if (now - first_hold_ <= hold_limit) {
    // No hit can have waited too long: every waiting hit is ready here, a word at a time.
    std::copy(waiting_.begin(), waiting_.end(), ready_bits);
  } else {
    ForEachWaiting([&](int slot) {
      if (now - since_[slot] > hold_limit) {
        clear(valid_bits, slot);
        uncached->push_back(Release(slot));
      } else {
        ready_bits[slot / 64] |= uint64_t{1} << (slot % 64);
      }
    });
  }
  const bool stall_check_due = control_.Rank() == kCoordinator && coordinator_.pending() > 0 &&
                               stall_.Due(now);
  // Every rank blocked with nothing to run for a while: the waits and the waiting hits go to the
  // coordinator, which checks for a deadlock. The count is the same on every rank, but blocked_
  // is this rank's own (a caller between two slices of its wait is not blocked), so another
  // rank may still hold a hit this one sends away. Its slot is invalidated, as for a hit held
  // too long: every rank then sends its hit of it the slow way in this same cycle. Leaving the
  // ready bit set instead would make the slot ready on a rank that kept its hit, which would
  // run the collective alone while the others wait at the coordinator.
  const bool check_deadlock = blocked_ && blocked_cycles_ >= kBlockedCyclesBeforeCheck;
  if (check_deadlock) {
    ForEachWaiting([&](int slot) {
      clear(ready_bits, slot);
      clear(valid_bits, slot);
      uncached->push_back(Release(slot));
    });
  }
  const bool need_slow = !uncached->empty() || shutdown || joined_ || stall_check_due ||
                         announce_.has_value() || check_deadlock;
  // Rank 0 records a timeline exactly when it has an observer for this cycle (controller.h).
  const bool marking = control_.Rank() == kCoordinator && CurrentRequestObserver() != nullptr;
  words_[0] = (need_slow ? 0 : kNoSlowPath) | (joined_ ? 0 : kNoneJoined) |
              (blocked_ ? kAllBlocked : 0) | (marking ? 0 : kNoHitMarks) |
              (any_waiting_ ? 0 : kNoneHolding);
  const auto exchange_start = Clock::now();
  KOLO_RETURN_IF_ERROR(control_.AndBits(words_.data(), words_.size())
                           .AddContext("negotiation: agreeing on cached tensors"));
  stats_.exchange_ns += Nanos(Clock::now() - exchange_start);
  *any_slow = !(words_[0] & kNoSlowPath);
  *any_joined = !(words_[0] & kNoneJoined);
  all_blocked_ = words_[0] & kAllBlocked;
  // From the AND-ed word only, so every rank decides alike. A joined rank sends every hit the
  // slow way, where the coordinator marks it.
  if (!(words_[0] & (kNoHitMarks | kNoneHolding)) && !*any_joined) {
    KOLO_RETURN_IF_ERROR(GatherHits());
  } else {
    hit_marks_.Clear();
  }

  // Slots some rank invalidated: erased everywhere; this rank's hit of one goes the slow way
  // (the invalidating rank asked for the slow path, so it runs this cycle).
  for (size_t w = 0; w < n; ++w) {
    for (uint64_t cleared = ~valid_bits[w]; cleared; cleared &= cleared - 1) {
      const int slot = static_cast<int>(w * 64) + __builtin_ctzll(cleared);
      if (static_cast<size_t>(slot) >= capacity) break;
      ++stats_.invalidations;
      if (Waiting(slot)) uncached->push_back(Release(slot));
      cache_.Erase(slot);
      hit_marks_.Forget(slot);
    }
  }
  MoveGroupsOfUncachedHits(uncached);
  if (*any_joined) {
    // A joined rank has no Request for its peers' names: everything goes to the coordinator,
    // which knows who joined (a joined rank always asks for the slow path).
    ForEachWaiting([&](int slot) { uncached->push_back(Release(slot)); });
    return Status::OK();
  }
  for (size_t w = 0; w < n; ++w) {
    // This rank's own bit is in the AND: a ready slot is always one of its waiting hits.
    const uint64_t ready_here = ready_bits[w] & valid_bits[w] & waiting_[w];
    if (hit_marks_.active()) hit_marks_.Forget(w, ready_bits[w] & valid_bits[w]);
    waiting_[w] &= ~ready_here;
    for (uint64_t bits = ready_here; bits; bits &= bits - 1) {
      const int slot = static_cast<int>(w * 64) + __builtin_ctzll(bits);
      ready->push_back(slot);
      cache_.Touch(slot);
      *without_id |= hit_id_[slot] < 0;
    }
  }
  return Status::OK();
}

Status Controller::GatherHits() {
  const size_t n = waiting_.size();
  const bool root = control_.Rank() == kCoordinator;
  if (root) held_.resize(n * static_cast<size_t>(control_.Size()));
  // waiting_ is what this rank put in the ready bits: the hits it released went the slow way.
  const auto exchange_start = Clock::now();
  KOLO_RETURN_IF_ERROR(
      control_.GatherWords(waiting_.data(), n, root ? held_.data() : nullptr, kCoordinator)
          .AddContext("negotiation: gathering cache hits for the timeline"));
  stats_.exchange_ns += Nanos(Clock::now() - exchange_start);
  if (!root) return Status::OK();
  RequestObserver* observer = CurrentRequestObserver();
  hit_marks_.Update(held_.data(), control_.Size(), n, [&](int slot, int rank) {
    if (observer) observer->RequestArrived(cache_.request(slot), rank);
  });
  return Status::OK();
}

void Controller::CacheResponses(const std::vector<Response>& responses, bool any_joined) {
  std::vector<std::pair<int, Request>> erased;  // entries Put erased, with their Requests
  for (const Response& r : responses) {
    for (const std::string& name : r.names) {
      auto it = sent_.find(name);
      const bool cacheable = !any_joined && r.names.size() == 1 &&
                             r.type != ResponseType::kError && r.type != ResponseType::kBarrier &&
                             r.type != ResponseType::kJoin;
      if (cacheable) {
        // Every rank puts the same names in the same order, so slots stay equal everywhere.
        // A rank without its own Request (cannot happen while nobody has joined) still takes
        // the slot, with a Request no submission matches, so a later one invalidates it.
        Request mine;
        if (it != sent_.end()) {
          mine = it->second;
        } else {
          mine.op = OpType::kJoin;
        }
        cache_.Put(r, mine, &erased);
      }
      if (it != sent_.end()) sent_.erase(it);
    }
  }
  // A hit whose entry was erased (its slot given to another name) waits for its peers the slow
  // way now. The first erasure of a slot holds the hit's Request; a later one in the same loop
  // is of an entry put there since (no longer waiting by then).
  for (auto& [slot, request] : erased) {
    hit_marks_.Forget(slot);  // the slot has another name now
    if (!Waiting(slot)) continue;
    Unhold(slot);
    deferred_.push_back(std::move(request));
  }
  MoveGroupsOfUncachedHits(&deferred_);
}

void Controller::MoveGroupsOfUncachedHits(std::vector<Request>* uncached) {
  std::unordered_map<std::string, bool> groups;
  for (const Request& r : *uncached) {
    if (r.group_size > 1) groups.emplace(r.group, true);
  }
  if (groups.empty()) return;
  ForEachWaiting([&](int slot) {
    const Request& r = cache_.request(slot);
    if (r.group_size > 1 && groups.count(r.group)) uncached->push_back(Release(slot));
  });
}

ResponseList Controller::Coordinate(const std::vector<std::string>& gathered) {
  ResponseList out;
  std::vector<RequestList> lists(gathered.size());
  for (size_t r = 0; r < gathered.size(); ++r) {
    auto list = DecodeRequestList(gathered[r]);
    if (!list.ok()) {
      out.shutdown = true;
      out.fatal_error = "coordinator: message from rank " + std::to_string(r) +
                        " rejected: " + list.status().message();
      return out;
    }
    coordinator_.Add(*list, static_cast<int>(r));
    lists[r].blocked = list->blocked;
    lists[r].waiting = std::move(list->waiting);
  }
  out.responses = coordinator_.TakeReady();
  for (Response& failed : stall_.Inspect(coordinator_, Clock::now())) {
    out.responses.push_back(std::move(failed));
  }
  for (Response& failed : deadlock_.Observe(coordinator_, lists, !out.responses.empty())) {
    out.responses.push_back(std::move(failed));
  }
  if (coordinator_.shutdown_requested()) {
    out.shutdown = true;
    out.shutdown_rank = coordinator_.shutdown_rank();
  }
  if (announce_) {
    out.tuned_fusion_threshold_bytes = announce_->fusion_threshold_bytes;
    out.tuned_cycle_time_ms = announce_->cycle_time_ms;
    announce_.reset();
  }
  return out;
}

StatusOr<ResponseList> Controller::SlowPath(const RequestList& mine) {
  const auto exchange_start = Clock::now();
  std::vector<std::string> gathered;
  KOLO_RETURN_IF_ERROR(control_.GatherBytes(EncodeRequestList(mine), &gathered, kCoordinator)
                           .AddContext("negotiation: gathering requests"));
  stats_.exchange_ns += Nanos(Clock::now() - exchange_start);
  std::string bytes;
  ResponseList result;
  if (control_.Rank() == kCoordinator) {
    result = Coordinate(gathered);
    bytes = EncodeResponseList(result);
  }
  const auto broadcast_start = Clock::now();
  KOLO_RETURN_IF_ERROR(control_.BroadcastBytes(&bytes, kCoordinator)
                           .AddContext("negotiation: broadcasting responses"));
  stats_.exchange_ns += Nanos(Clock::now() - broadcast_start);
  if (control_.Rank() == kCoordinator) return result;
  auto decoded = DecodeResponseList(bytes);
  if (!decoded.ok()) {
    return Status(decoded.status()).AddContext("negotiation: response from the coordinator");
  }
  return decoded;
}

}  // namespace kolo
