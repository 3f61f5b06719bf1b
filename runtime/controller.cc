#include "runtime/controller.h"

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
  pointers.reserve(mine.requests.size());
  for (const Request& r : mine.requests) pointers.push_back(&r);
  return Negotiate(pointers, mine.shutdown);
}

StatusOr<ResponseList> Controller::Negotiate(const std::vector<const Request*>& mine,
                                             bool shutdown) {
  const auto start = Clock::now();
  ++stats_.cycles;
  std::vector<Request> uncached;
  uncached.swap(deferred_);
  std::vector<int> stale;
  const size_t count = mine.size();
  found_.assign(count, ResponseCache::Lookup::kMiss);
  found_slots_.assign(count, -1);
  bool any_group = false;
  for (size_t i = 0; i < count; ++i) {
    const Request& r = *mine[i];
    if (r.op == OpType::kJoin) joined_ = true;
    if (cache_.enabled() && ResponseCache::Cacheable(r)) {
      found_[i] = cache_.Find(r, &found_slots_[i]);
    }
    any_group = any_group || r.group_size > 1;
  }
  std::unordered_map<std::string, bool> group_all_hits;  // group key -> every member hit
  if (any_group) {
    for (size_t i = 0; i < count; ++i) {
      const Request& r = *mine[i];
      if (r.group_size <= 1) continue;
      auto g = group_all_hits.emplace(r.group, true).first;
      g->second = g->second && found_[i] == ResponseCache::Lookup::kHit;
    }
  }
  for (size_t i = 0; i < count; ++i) {
    const Request& r = *mine[i];
    ResponseCache::Lookup lookup = found_[i];
    const int slot = found_slots_[i];
    // A group goes one way: when one member cannot be served from the cache, none is, and the
    // others' slots are invalidated so that every rank sends this group the slow way.
    if (lookup == ResponseCache::Lookup::kHit && r.group_size > 1 && !group_all_hits[r.group]) {
      lookup = ResponseCache::Lookup::kStale;
    }
    if (lookup == ResponseCache::Lookup::kHit && Waiting(slot)) {
      // Cannot happen (a name is in flight once, a slot holds one name); never drop a Request.
      lookup = ResponseCache::Lookup::kMiss;
    }
    switch (lookup) {
      case ResponseCache::Lookup::kHit:
        ++stats_.cache_hits;
        Hold(slot, start, r.id);
        break;
      case ResponseCache::Lookup::kStale:
        stale.push_back(slot);
        [[fallthrough]];
      case ResponseCache::Lookup::kMiss:
        if (cache_.enabled() && ResponseCache::Cacheable(r)) ++stats_.cache_misses;
        uncached.push_back(r);
        break;
    }
  }

  bool any_slow = true;
  bool any_joined = joined_;
  ready_slots_.clear();
  if (cache_.enabled()) {
    KOLO_RETURN_IF_ERROR(
        AgreeOnHits(shutdown, stale, &uncached, &ready_slots_, &any_slow, &any_joined));
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
  for (int slot : ready_slots_) {
    fused.Add(cache_.response(slot), hit_id_[slot], cache_.bytes(slot));
  }
  if (any_slow) {
    if (cache_.enabled()) CacheResponses(result.responses, any_joined);
    for (Response& r : result.responses) {
      if (r.type == ResponseType::kJoin) joined_ = false;  // every rank has joined
      fused.Add(std::move(r));
    }
  }
  result.responses = fused.Take();
  Tune(result.responses);
  stats_.negotiate_ns += Nanos(Clock::now() - start);
  return result;
}

Status Controller::AgreeOnHits(bool shutdown, const std::vector<int>& stale,
                               std::vector<Request>* uncached, std::vector<int>* ready,
                               bool* any_slow, bool* any_joined) {
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
  ForEachWaiting([&](int slot) {
    if (now - since_[slot] > hold_limit) {
      clear(valid_bits, slot);
      uncached->push_back(Release(slot));
    } else {
      ready_bits[slot / 64] |= uint64_t{1} << (slot % 64);
    }
  });
  const bool stall_check_due = control_.Rank() == kCoordinator && coordinator_.pending() > 0 &&
                               stall_.Due(now);
  const bool need_slow =
      !uncached->empty() || shutdown || joined_ || stall_check_due || announce_.has_value();
  words_[0] = (need_slow ? 0 : kNoSlowPath) | (joined_ ? 0 : kNoneJoined);
  const auto exchange_start = Clock::now();
  KOLO_RETURN_IF_ERROR(control_.AndBits(words_.data(), words_.size())
                           .AddContext("negotiation: agreeing on cached tensors"));
  stats_.exchange_ns += Nanos(Clock::now() - exchange_start);
  *any_slow = !(words_[0] & kNoSlowPath);
  *any_joined = !(words_[0] & kNoneJoined);

  // Slots some rank invalidated: erased everywhere; this rank's hit of one goes the slow way
  // (the invalidating rank asked for the slow path, so it runs this cycle).
  for (size_t w = 0; w < n; ++w) {
    for (uint64_t cleared = ~valid_bits[w]; cleared; cleared &= cleared - 1) {
      const int slot = static_cast<int>(w * 64) + __builtin_ctzll(cleared);
      if (static_cast<size_t>(slot) >= capacity) break;
      ++stats_.invalidations;
      if (Waiting(slot)) uncached->push_back(Release(slot));
      cache_.Erase(slot);
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
    for (uint64_t bits = ready_bits[w] & valid_bits[w]; bits; bits &= bits - 1) {
      const int slot = static_cast<int>(w * 64) + __builtin_ctzll(bits);
      if (!Waiting(slot)) continue;  // cannot happen: this rank's own bit is in the AND
      ready->push_back(slot);
      cache_.Touch(slot);
      Unhold(slot);
    }
  }
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
  for (size_t r = 0; r < gathered.size(); ++r) {
    auto list = DecodeRequestList(gathered[r]);
    if (!list.ok()) {
      out.shutdown = true;
      out.fatal_error = "coordinator: message from rank " + std::to_string(r) +
                        " rejected: " + list.status().message();
      return out;
    }
    coordinator_.Add(*list, static_cast<int>(r));
  }
  out.responses = coordinator_.TakeReady();
  for (Response& failed : stall_.Inspect(coordinator_, Clock::now())) {
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
