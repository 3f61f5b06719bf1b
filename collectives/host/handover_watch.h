// HandoverWatch: decides, on one rank, whether the shared-memory all-reduce streams what its
// peers read next (StreamCopy, through memory) or stores it plainly (left in this core's cache
// for the reader to pull from there), from how long a cache line takes to cross between the
// cores.
//
// Why a decision at run time: the same two vCPUs hand each other a cache line in 40-60 ns at
// some times and in 160-250 ns at others (docs/machine-notes.md 11: the host places them behind
// one last-level cache or behind two). Behind one, plain stores win: at 1 MiB the shm all-reduce
// took 50-68 us plainly and 124-153 us streamed, at 64 MiB 9-11.5 ms against 14-16, since
// streamed data comes back from DRAM. Behind two, every line a plain store takes from the other
// cache and every line the reader pulls back is a round trip between them: plainly the
// all-reduce took 533-609 us at 1 MiB and 35-39 ms at 64 MiB, streamed 100-114 us and 9-10 ms
// (docs/benchmarks.md, "Streamed stores in the slow state"). The crossing time tells the two
// apart and costs a few microseconds to measure.
//
// How: after the second barrier of a piece, in calls of at least 64 KiB without a slice hook
// (where the ranks leave the barrier together and streaming can matter), every kProbeEvery-th
// such barrier (counted apart, the same on every rank) local rank 0 and one peer, in turn, pass
// a cache line back and forth (ShmNodeReducer::ProbeHandover): half the shortest of four timed
// batches of round trips is the crossing. The two sides time almost the same trips, so they
// nearly always reach the same verdict, and need not: each rank decides for its own stores,
// and either choice gives the same bits. The first probe with a peer decides; after it a peer
// is taken as slow once two probes in a row say so, and as fast once two say so; a rank
// streams while any peer it probes is slow. Ranks other
// than 0 only ever probe rank 0, so a slow pair of two other ranks goes unseen (on a 2-rank node
// there is no such pair).
#ifndef KOLO_COLLECTIVES_HOST_HANDOVER_WATCH_H_
#define KOLO_COLLECTIVES_HOST_HANDOVER_WATCH_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace kolo {

class HandoverWatch {
 public:
  // Between the two states of the machine above: probes read 40-63 ns behind one cache and
  // 156-226 behind two (kolo-core-probe on the same machine: 36-51 against 162-177).
  static constexpr int64_t kSlowHandoverNs = 120;
  // A probe costs 17 round trips (2 us behind one cache, 6 behind two); a probing barrier
  // comes at least once per call of 64 KiB or more (10 us or longer), so probing every 8th
  // costs at most ~2% of the smallest calls. The first verdict comes with the first probe, a
  // change with the second probe after it: within 16 pieces of a change of state (ten rounds
  // with every 32nd left 64 pieces of 4 MiB calls stored the wrong way around a change).
  static constexpr uint64_t kProbeEvery = 8;
  static constexpr uint64_t kRoundTrips = 16;

  // kAuto: as the probes say. kPlain, kStreamed: fixed (tests, benchmarks; kPlain also where
  // ranks share cores and a probe's peer may not be running to answer).
  enum class Mode { kAuto, kPlain, kStreamed };

  explicit HandoverWatch(int ranks = 1, Mode mode = Mode::kAuto)
      : mode_(mode), peers_(static_cast<size_t>(ranks > 0 ? ranks : 1)) {}

  // The peer `rank` probes right after probing barrier `barrier` (counted from 1), or -1: none.
  // The first, the 9th, ...: a new process learns the state at its first call. Local rank 0
  // probes peers 1..ranks-1 in turn, one per probe, and each of them probes rank 0.
  int ProbePeer(int rank, uint64_t barrier) const {
    const int ranks = static_cast<int>(peers_.size());
    if (mode_ != Mode::kAuto || ranks < 2 || barrier % kProbeEvery != 1) return -1;
    const int partner = 1 + static_cast<int>((barrier / kProbeEvery) % (ranks - 1));
    if (rank == 0) return partner;
    return rank == partner ? 0 : -1;
  }

  // A probe's result with `peer`: the crossing in ns, or negative if it was not measured.
  void Add(int peer, int64_t ns) {
    if (ns < 0 || peer < 0 || static_cast<size_t>(peer) >= peers_.size()) return;
    Peer& p = peers_[static_cast<size_t>(peer)];
    const bool says_slow = ns > kSlowHandoverNs;
    // The first probe decides alone: until then nothing is known, and waiting for a second
    // would leave the first kProbeEvery probing barriers to chance.
    const bool first = p.agreeing == 0;
    p.agreeing = says_slow == p.last_said_slow ? p.agreeing + 1 : 1;
    p.last_said_slow = says_slow;
    if (first || p.agreeing >= 2) p.slow = says_slow;
  }

  bool streaming() const {
    if (mode_ != Mode::kAuto) return mode_ == Mode::kStreamed;
    for (const Peer& p : peers_) {
      if (p.slow) return true;
    }
    return false;
  }

 private:
  struct Peer {
    bool slow = false;
    bool last_said_slow = false;
    int agreeing = 0;  // probes in a row that said last_said_slow; 0: none measured yet
  };

  Mode mode_;
  std::vector<Peer> peers_;  // by local rank
};

// KOLO_SHM_STORES: "auto" (the watch decides), "plain" or "streamed"; false for anything else.
inline bool ParseShmStores(std::string_view text, HandoverWatch::Mode* mode) {
  if (text == "auto") {
    *mode = HandoverWatch::Mode::kAuto;
  } else if (text == "plain") {
    *mode = HandoverWatch::Mode::kPlain;
  } else if (text == "streamed") {
    *mode = HandoverWatch::Mode::kStreamed;
  } else {
    return false;
  }
  return true;
}

// The mode KOLO_SHM_STORES's word names, kAuto for anything else (runtime/config.cc refuses
// other words before anything runs).
inline HandoverWatch::Mode ShmStoresOrAuto(std::string_view text) {
  HandoverWatch::Mode mode = HandoverWatch::Mode::kAuto;
  return ParseShmStores(text, &mode) ? mode : HandoverWatch::Mode::kAuto;
}

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_HOST_HANDOVER_WATCH_H_
