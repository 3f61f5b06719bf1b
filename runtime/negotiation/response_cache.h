// The response cache (Horovod's response_cache.h idea, kolo's layout): once a name has been
// negotiated, its single-tensor Response is kept, under the same slot number on every rank, so
// later cycles agree on it with one bitwise-AND all-reduce of "slot i is ready here" bits
// instead of a gather of Requests and a broadcast of Responses (runtime/negotiation/controller.cc).
//
// Every rank must hold the same entries in the same slots: entries are only put, touched and
// erased in response to facts every rank shares (the broadcast ResponseList, the AND-ed bits),
// in the same order. Each rank keeps its own Request beside the Response: an allgather's or
// alltoall's first dimension differs per rank, so a rank compares a new submission with the
// one it made itself.
//
// Capacity: KOLO_CACHE_CAPACITY entries (0 = no cache); the least recently used entry goes
// when a new one needs its slot.
//
// Every cached tensor is looked up and touched every cycle, so both are flat arrays over slots
// rather than node containers: the name index is an open-addressing table of slot numbers
// (linear probing, at most half full, backward-shift deletion) that compares a slot's stored
// hash before its name, and the LRU order is a doubly linked list threaded through two int
// arrays. A Request carrying this rank's id of its name (Request::id, TensorQueue) is found
// without hashing: each slot remembers the id and id_serial its name last came with, and an
// array over ids points back at the slot; the queue never gives an (id, id_serial) pair to two
// names, so a matching pair needs no name comparison. The parameters are compared as flat keys
// (RequestKey), not as Requests.
#ifndef KOLO_RUNTIME_NEGOTIATION_RESPONSE_CACHE_H_
#define KOLO_RUNTIME_NEGOTIATION_RESPONSE_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fusion/planner.h"
#include "protocol/message.h"
#include "runtime/negotiation/request_key.h"

namespace kolo {

namespace internal {

// Every hit of every cycle compares a shape of a few dimensions, usually no splits and no
// group: an inline loop beats vector== and string==, which call memcmp even for these.
inline bool SameDims(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

}  // namespace internal

// True when `a` and `b` ask for the same operation with the same parameters (all that goes into
// a Response, including this rank's shape and splits), in the same group: the coordinator
// refuses a name grouped on one rank and not on another, so a hit must not pass it.
inline bool SameParameters(const Request& a, const Request& b) {
  return a.op == b.op && a.dtype == b.dtype && a.reduce_op == b.reduce_op && a.root == b.root &&
         a.prescale == b.prescale && a.postscale == b.postscale && a.device == b.device &&
         a.group_size == b.group_size && internal::SameDims(a.shape, b.shape) &&
         internal::SameDims(a.splits, b.splits) && a.group.size() == b.group.size() &&
         (a.group.empty() || a.group == b.group);
}

class ResponseCache {
 public:
  enum class Lookup {
    kMiss,   // name not cached
    kHit,    // cached with exactly this Request's parameters
    kStale,  // cached with other parameters: the entry must be invalidated on every rank
  };

  explicit ResponseCache(size_t capacity);

  size_t capacity() const { return capacity_; }
  size_t size() const { return size_; }
  bool enabled() const { return capacity_ > 0; }

  // Only operations whose Response depends on nothing but the ranks' Requests are cached
  // (IsCacheable, request_key.h).
  static bool Cacheable(const Request& r) { return IsCacheable(r); }

  // Looks `r` up by id, else by name (then remembering the id); *slot is set for kHit and
  // kStale. `key` is RequestKey::Of(r). Inline: it runs for every submission of every cycle,
  // nearly always a hit by id, which reads the two keys only (not the Request).
  Lookup Find(const RequestKey& key, const Request& r, int* slot) {
    if (key.id >= 0 && static_cast<size_t>(key.id) < slot_of_id_.size()) {
      const int s = slot_of_id_[key.id];
      // The queue never gives an (id, id_serial) pair to two names: this is the slot's name.
      if (s != kNone && keys_[s].id_serial == key.id_serial) {
        *slot = s;
        return Matches(s, key, r) ? Lookup::kHit : Lookup::kStale;
      }
    }
    return FindByName(key, r, slot);
  }
  Lookup Find(const Request& r, int* slot) { return Find(RequestKey::Of(r), r, slot); }
  const Response& response(int slot) const { return slots_[slot].response; }
  const std::string& name(int slot) const { return slots_[slot].request.name; }
  // What fusing the slot's Response needs (fusion/planner.h), kept flat beside it.
  const FusionKey& fusion_key(int slot) const { return fusion_[slot]; }
  const FusionKey* fusion_keys() const { return fusion_.data(); }  // by slot
  // This rank's Request for the slot's name: every field equals that of a submission that hits
  // it (SameParameters, the name, this rank, not refused), so a hit needs no copy of its own.
  const Request& request(int slot) const { return slots_[slot].request; }
  bool occupied(int slot) const { return slots_[slot].occupied; }

  // Marks the slot most recently used.
  void Touch(int slot);
  void Erase(int slot);
  // Caches `single` (a Response naming one tensor, not an error) with this rank's Request for
  // it, replacing an entry of the same name; evicts the least recently used entry when full.
  // Returns the slot. Entries it erases (the one of the same name, the evicted one) are
  // appended to *erased, if given, as (slot, their Request), in order.
  int Put(const Response& single, const Request& mine,
          std::vector<std::pair<int, Request>>* erased = nullptr);

 private:
  struct Slot {
    bool occupied = false;
    Response response;
    Request request;  // request.name == response.names[0]
  };
  static constexpr int kNone = -1;
  // SameParameters(request(slot), r), from the keys when both are simple (a simple key and
  // one that is not always belong to different parameters).
  bool Matches(int slot, const RequestKey& key, const Request& r) const {
    const RequestKey& mine = keys_[slot];
    if (mine.simple != key.simple) return false;
    return key.simple ? mine.SameSimpleParameters(key) : SameParameters(slots_[slot].request, r);
  }

  // Find when r's id does not lead to its name's slot.
  Lookup FindByName(const RequestKey& key, const Request& r, int* slot);

  // The index position holding `slot`'s name, or of the empty cell where a name of hash `h`
  // would go (Find by name: `name` non-null).
  size_t Probe(uint64_t h, const std::string& name, int* slot) const;
  // Points `id` (when >= 0) at `slot`, dropping the slot's previous id.
  void Remember(int slot, int32_t id, uint32_t serial);
  void Forget(int slot);
  void IndexInsert(int slot);
  void IndexErase(int slot);
  void Unlink(int slot);
  void LinkFront(int slot);

  const size_t capacity_;
  size_t size_ = 0;
  std::vector<Slot> slots_;
  std::vector<uint64_t> hash_;  // per slot: the hash of its name
  std::vector<RequestKey> keys_;   // per slot: of its Request; id_serial: of id_[slot]
  std::vector<FusionKey> fusion_;  // per slot: FusionKey::Of its Response
  std::vector<int> index_;      // open addressing: slot numbers or kNone; a power of two long
  size_t mask_ = 0;
  std::vector<int> newer_, older_;  // per slot: LRU neighbours (kNone at the ends)
  std::vector<int32_t> id_;         // per slot: the id its name last came with, or -1
  std::vector<int> slot_of_id_;     // by id: the slot whose id_ it is, or kNone
  int newest_ = kNone, oldest_ = kNone;
  std::vector<int> free_;  // free slots, lowest last
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_NEGOTIATION_RESPONSE_CACHE_H_
