#include "runtime/negotiation/response_cache.h"

#include <functional>


namespace kolo {

namespace {

uint64_t NameHash(const std::string& name) { return std::hash<std::string>()(name); }

}  // namespace

ResponseCache::ResponseCache(size_t capacity)
    : capacity_(capacity),
      slots_(capacity),
      hash_(capacity, 0),
      keys_(capacity),
      fusion_(capacity),
      newer_(capacity, kNone),
      older_(capacity, kNone),
      id_(capacity, -1) {
  free_.reserve(capacity);
  for (size_t i = capacity; i > 0; --i) free_.push_back(static_cast<int>(i - 1));
  if (capacity == 0) return;
  size_t cells = 2;
  while (cells < 2 * capacity) cells *= 2;  // at most half full: short probe runs
  index_.assign(cells, kNone);
  mask_ = cells - 1;
}

size_t ResponseCache::Probe(uint64_t h, const std::string& name, int* slot) const {
  for (size_t i = h & mask_;; i = (i + 1) & mask_) {
    const int s = index_[i];
    if (s == kNone || (hash_[s] == h && slots_[s].request.name == name)) {
      *slot = s;
      return i;
    }
  }
}

void ResponseCache::IndexInsert(int slot) {
  int found;
  const size_t i = Probe(hash_[slot], slots_[slot].request.name, &found);
  index_[i] = slot;  // found == kNone: Put erased any entry of this name first
}

void ResponseCache::IndexErase(int slot) {
  int found;
  size_t hole = Probe(hash_[slot], slots_[slot].request.name, &found);
  // Backward-shift deletion: move later members of the probe run into the hole when their home
  // cell is not between the hole and them, so that no lookup stops early at the hole.
  for (size_t j = (hole + 1) & mask_; index_[j] != kNone; j = (j + 1) & mask_) {
    const size_t home = hash_[index_[j]] & mask_;
    const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    index_[hole] = index_[j];
    hole = j;
  }
  index_[hole] = kNone;
}

void ResponseCache::Unlink(int slot) {
  const int newer = newer_[slot], older = older_[slot];
  (newer == kNone ? newest_ : older_[newer]) = older;
  (older == kNone ? oldest_ : newer_[older]) = newer;
  newer_[slot] = older_[slot] = kNone;
}

void ResponseCache::LinkFront(int slot) {
  older_[slot] = newest_;
  newer_[slot] = kNone;
  (newest_ == kNone ? oldest_ : newer_[newest_]) = slot;
  newest_ = slot;
}

void ResponseCache::Forget(int slot) {
  if (id_[slot] >= 0) slot_of_id_[id_[slot]] = kNone;
  id_[slot] = -1;
}

void ResponseCache::Remember(int slot, int32_t id, uint32_t serial) {
  keys_[slot].id_serial = serial;
  if (id_[slot] == id) return;
  Forget(slot);
  if (id < 0) return;
  if (static_cast<size_t>(id) >= slot_of_id_.size()) slot_of_id_.resize(id + 1, kNone);
  const int previous = slot_of_id_[id];  // a name that had this id before the queue reused it
  if (previous != kNone) id_[previous] = -1;
  slot_of_id_[id] = slot;
  id_[slot] = id;
}

ResponseCache::Lookup ResponseCache::FindByName(const RequestKey& key, const Request& r,
                                               int* slot) {
  if (capacity_ == 0) return Lookup::kMiss;
  int found = kNone;
  Probe(NameHash(r.name), r.name, &found);
  if (found == kNone) return Lookup::kMiss;
  Remember(found, r.id, r.id_serial);
  *slot = found;
  return Matches(found, key, r) ? Lookup::kHit : Lookup::kStale;
}

void ResponseCache::Touch(int slot) {
  if (newest_ == slot) return;
  Unlink(slot);
  LinkFront(slot);
}

void ResponseCache::Erase(int slot) {
  Slot& s = slots_[slot];
  if (!s.occupied) return;
  IndexErase(slot);
  Unlink(slot);
  Forget(slot);
  s = Slot();
  --size_;
  free_.push_back(slot);
}

int ResponseCache::Put(const Response& single, const Request& mine,
                       std::vector<std::pair<int, Request>>* erased) {
  auto erase = [&](int slot) {
    if (erased) erased->emplace_back(slot, std::move(slots_[slot].request));
    Erase(slot);
  };
  const uint64_t h = NameHash(single.names[0]);
  int existing;
  Probe(h, single.names[0], &existing);
  if (existing != kNone) erase(existing);
  if (free_.empty()) erase(oldest_);
  const int slot = free_.back();
  free_.pop_back();
  Slot& s = slots_[slot];
  s.occupied = true;
  s.response = single;
  s.request = mine;
  s.request.refused.clear();
  s.request.name = single.names[0];  // also for a placeholder Request (Controller)
  hash_[slot] = h;
  keys_[slot] = RequestKey::Of(s.request);
  fusion_[slot] = FusionKey::Of(single);
  IndexInsert(slot);
  LinkFront(slot);
  Remember(slot, mine.id, mine.id_serial);
  ++size_;
  return slot;
}

}  // namespace kolo
