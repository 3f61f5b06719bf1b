#include "runtime/response_cache.h"

namespace kolo {

ResponseCache::ResponseCache(size_t capacity) : capacity_(capacity), slots_(capacity) {
  free_.reserve(capacity);
  for (size_t i = capacity; i > 0; --i) free_.push_back(static_cast<int>(i - 1));
}

bool ResponseCache::Cacheable(const Request& r) {
  if (!r.refused.empty()) return false;
  switch (r.op) {
    case OpType::kAllreduce:
    case OpType::kAllgather:
    case OpType::kBroadcast:
    case OpType::kReducescatter:
    case OpType::kAlltoall:
      return true;
    case OpType::kBarrier:  // unique names, and a barrier must include joined ranks
    case OpType::kJoin:
      return false;
  }
  return false;
}

bool SameParameters(const Request& a, const Request& b) {
  return a.op == b.op && a.dtype == b.dtype && a.shape == b.shape &&
         a.reduce_op == b.reduce_op && a.root == b.root && a.prescale == b.prescale &&
         a.postscale == b.postscale && a.splits == b.splits && a.device == b.device &&
         a.group == b.group && a.group_size == b.group_size;
}

ResponseCache::Lookup ResponseCache::Find(const Request& r, int* slot) const {
  auto it = by_name_.find(r.name);
  if (it == by_name_.end()) return Lookup::kMiss;
  *slot = it->second;
  return SameParameters(slots_[it->second].request, r) ? Lookup::kHit : Lookup::kStale;
}

void ResponseCache::Touch(int slot) {
  Slot& s = slots_[slot];
  lru_.splice(lru_.begin(), lru_, s.lru);
}

void ResponseCache::Erase(int slot) {
  Slot& s = slots_[slot];
  if (!s.occupied) return;
  by_name_.erase(s.response.names[0]);
  lru_.erase(s.lru);
  s = Slot();
  free_.push_back(slot);
}

int ResponseCache::Put(const Response& single, const Request& mine,
                       std::vector<std::pair<int, Request>>* erased) {
  auto erase = [&](int slot) {
    if (erased) erased->emplace_back(slot, std::move(slots_[slot].request));
    Erase(slot);
  };
  auto existing = by_name_.find(single.names[0]);
  if (existing != by_name_.end()) erase(existing->second);
  if (free_.empty()) erase(lru_.back());
  const int slot = free_.back();
  free_.pop_back();
  Slot& s = slots_[slot];
  s.occupied = true;
  s.response = single;
  s.request = mine;
  s.request.refused.clear();
  lru_.push_front(slot);
  s.lru = lru_.begin();
  by_name_.emplace(single.names[0], slot);
  return slot;
}

}  // namespace kolo
