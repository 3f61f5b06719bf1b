// HandoverWatch: decides, on one rank, whether the shared-memory all-reduce streams what its
// peers read next (StreamCopy, through memory) or stores it plainly (left in this core's cache
// for the reader to pull from there), from how long a cache line takes to cross between the
// cores.
//
// Why a decision at run time: the same two vCPUs hand each other a cache line in 40-60 ns at
// some times and in 160-250 ns at others (docs/machine-notes.md 11: the host places them behind
// one last-level cache or behind two). Behind one, plain stores win: at 1 MiB the shm all-reduce
// takes ~50 us plainly and ~130 us streamed, since streamed data comes back from DRAM. Behind
// two, every line a plain store takes from the other cache and every line the reader pulls
// back is a round trip between them, and the all-reduce runs 4x slower (1 MiB 530 us, 64 MiB
// 35 ms) while streamed it keeps about the speed it has behind one cache (1 MiB ~100 us, 64 MiB
// 9 ms). The crossing time tells the two apart and costs a few microseconds to measure.
//
// How: every kProbeEvery-th barrier of the pieced path (the same barriers on every rank, which
// pass them in the same order), local rank 0 and one peer, in turn, pass a cache line back and
// forth kRoundTrips times right after the barrier (ShmNodeReducer::ProbeHandover); half the
// shortest round trip is the crossing. Each side measures the same round trips, so the two
// reach the same verdict. A peer is taken as slow once two probes in a row say so, and as fast
// once two say so; this rank streams while any peer it probes is slow. Each rank decides for
// its own stores, and either choice gives the same bits, so nothing needs to agree.
#ifndef KOLO_COLLECTIVES_HOST_HANDOVER_WATCH_H_
#define KOLO_COLLECTIVES_HOST_HANDOVER_WATCH_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace kolo {

class HandoverWatch {
 public:
  // Between the two states of the machine above: probes read 50-70 ns behind one cache and
  // 190-250 behind two (kolo-core-probe: 30-60 against 160-260).
  static constexpr int64_t kSlowHandoverNs = 120;
  // A probe costs kRoundTrips round trips (2-8 us); every 32 barriers is at most a few percent
  // of the smallest pieced calls and catches a change within a few calls.
  static constexpr uint64_t kProbeEvery = 32;
  static constexpr uint64_t kRoundTrips = 16;

  // kAuto: as the probes say. kPlain, kStreamed: fixed (tests, benchmarks; kPlain also where
  // ranks share cores and a probe's peer may not be running to answer).
  enum class Mode { kAuto, kPlain, kStreamed };

  explicit HandoverWatch(int ranks = 1, Mode mode = Mode::kAuto)
      : mode_(mode), peers_(static_cast<size_t>(ranks > 0 ? ranks : 1)) {}

  // The peer `rank` probes right after barrier `barrier`, or -1: none. Local rank 0 probes
  // peers 1..ranks-1 in turn, one per probing barrier, and each of them probes rank 0.
  int ProbePeer(int rank, uint64_t barrier) const {
    const int ranks = static_cast<int>(peers_.size());
    if (mode_ != Mode::kAuto || ranks < 2 || barrier % kProbeEvery != 0) return -1;
    const int partner = 1 + static_cast<int>((barrier / kProbeEvery) % (ranks - 1));
    if (rank == 0) return partner;
    return rank == partner ? 0 : -1;
  }

  // A probe's result with `peer`: the crossing in ns, or negative if it was not measured.
  void Add(int peer, int64_t ns) {
    if (ns < 0 || peer < 0 || static_cast<size_t>(peer) >= peers_.size()) return;
    Peer& p = peers_[static_cast<size_t>(peer)];
    const bool says_slow = ns > kSlowHandoverNs;
    p.agreeing = says_slow == p.last_said_slow ? p.agreeing + 1 : 1;
    p.last_said_slow = says_slow;
    if (p.agreeing >= 2) p.slow = says_slow;
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
    int agreeing = 0;  // probes in a row that said last_said_slow
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

// What KOLO_SHM_STORES names in this process's environment: kAuto when unset (runtime/config.cc
// refuses a bad value at kolo_init, before any all-reduce; one that gets past it counts as unset).
inline HandoverWatch::Mode ShmStoresFromEnvironment() {
  HandoverWatch::Mode mode = HandoverWatch::Mode::kAuto;
  const char* text = std::getenv("KOLO_SHM_STORES");
  if (text == nullptr || !ParseShmStores(text, &mode)) return HandoverWatch::Mode::kAuto;
  return mode;
}

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_HOST_HANDOVER_WATCH_H_
