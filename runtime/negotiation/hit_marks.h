// Rank 0's record of the cache hits it has shown as ready marks (the timeline's, on cached
// steps: controller.h). A rank's hit waits for its peers with its bit set in every cycle until
// the slot runs; its mark belongs to the first of those cycles only. Pure bit logic, so that it
// is unit-tested without a world.
#ifndef KOLO_RUNTIME_NEGOTIATION_HIT_MARKS_H_
#define KOLO_RUNTIME_NEGOTIATION_HIT_MARKS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kolo {

class HitMarks {
 public:
  // `held`: every rank's waiting-hit bits of this cycle, rank after rank, `words` words each.
  // Calls mark(slot, rank) for each bit that was not set in the previous call (or was forgotten
  // since), in rank order, then slot order.
  template <typename F>
  void Update(const uint64_t* held, int ranks, size_t words, F mark) {
    const size_t total = static_cast<size_t>(ranks) * words;
    if (seen_.size() != total || words_ != words) seen_.assign(total, 0);
    words_ = words;
    for (size_t i = 0; i < total; ++i) {
      for (uint64_t fresh = held[i] & ~seen_[i]; fresh; fresh &= fresh - 1) {
        mark(static_cast<int>((i % words) * 64) + __builtin_ctzll(fresh),
             static_cast<int>(i / words));
      }
      seen_[i] = held[i];
    }
  }

  // The slots of `bits` in word `word` ran this cycle, or their entries were erased: a bit of
  // one of them in a later cycle is a new step's hit.
  void Forget(size_t word, uint64_t bits) {
    if (seen_.empty() || word >= words_) return;
    for (size_t i = word; i < seen_.size(); i += words_) seen_[i] &= ~bits;
  }
  void Forget(int slot) { Forget(static_cast<size_t>(slot) / 64, uint64_t{1} << (slot % 64)); }

  // A cycle whose bits were not gathered: nothing is remembered, so the next gathered bits are
  // all new (a timeline started meanwhile marks the hits that wait then).
  void Clear() { seen_.clear(); }
  bool active() const { return !seen_.empty(); }

 private:
  std::vector<uint64_t> seen_;  // the last gathered bits, less the forgotten ones
  size_t words_ = 0;
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_NEGOTIATION_HIT_MARKS_H_
