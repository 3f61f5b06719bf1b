#include "collectives/host/shm_node.h"

#include <sched.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KOLO_CPU_RELAX() _mm_pause()
#else
#define KOLO_CPU_RELAX() ((void)0)
#endif

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>

#include "base/online_cores.h"
#include "collectives/host/node_pieces.h"
#include "collectives/host/stream_copy.h"
#include "collectives/reduce.h"

namespace kolo {
namespace {

constexpr size_t kArrivedOffset = 0;
// Barrier waits: spin (State::spin_polls), then yield this many times (~30 us), then sleep
// 1, 2, ... up to kMaxSleepMicros between polls.
constexpr uint64_t kYieldsBeforeSleep = 100;
constexpr uint64_t kMaxSleepMicros = 50;
constexpr size_t kFailedOffset = 64;
constexpr size_t kProbeOffset = 128;
constexpr size_t kSlotOffset = 192;
// Polls of a peer's counter before yielding the core (see StateFor). Measured, 2 ranks on 2
// cores, one-barrier path at 16 B: 0 polls 0.38 us, 64-4096 polls 0.15-0.17 us (MPI 0.27);
// 4 ranks on 2 cores, two-barrier path: 64 polls (with pause) 15.8 us, 2 polls 5.2 us.
constexpr uint64_t kSpinPollsOwnCore = 256;
constexpr uint64_t kSpinPollsShared = 2;

constexpr size_t kAutoSmall = ~size_t{0};
// Calls below this never probe: their copies are too short to stream (kStreamCopyMinBytes per
// slice at most), and a probe (a few us) would be a large share of their time.
constexpr size_t kProbeMinBytes = size_t{64} << 10;

std::atomic<uint64_t>* Counter(void* region, size_t offset) {
  return reinterpret_cast<std::atomic<uint64_t>*>(static_cast<char*>(region) + offset);
}

// Run's and RunSmall's `postscale`: 1, or a float32/float64 result without a hook.
Status CheckPostscale(DataType dtype, bool hook, double postscale) {
  if (postscale == 1.0) return Status::OK();
  if (hook || (dtype != DataType::kFloat32 && dtype != DataType::kFloat64)) {
    return InternalError("shared-memory all-reduce: a postscale on " +
                         std::string(DataTypeName(dtype)) + (hook ? " with a slice hook" : "") +
                         " (only float32/float64 without a hook fold one)");
  }
  return Status::OK();
}

// A call's parts seen as one buffer, their concatenation: the pieces and slices are ranges of
// it, and ForEach finds where each range lies in the parts' own buffers.
class Concatenation {
 public:
  // `starts`: scratch for where each part starts, reused from call to call.
  Concatenation(const AllreducePart* parts, size_t n, size_t elem_bytes,
                std::vector<size_t>* starts)
      : parts_(parts), es_(elem_bytes), starts_(*starts) {
    starts_.clear();
    for (size_t i = 0; i < n; ++i) {
      starts_.push_back(total_);
      total_ += parts[i].count;
    }
  }
  size_t total() const { return total_; }

  // f(send, recv, done, len) for each run of the elements [begin, begin + count) that lies in
  // one part: send and recv point at the run's first element in that part's buffers, and
  // `done` counts the range's elements before the run. Stops at f's first error.
  template <typename F>
  Status ForEach(size_t begin, size_t count, F&& f) const {
    if (count == 0) return Status::OK();
    // The last part starting at or before `begin` (empty parts start where the next one does).
    size_t i = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), begin) -
                                   starts_.begin()) -
               1;
    for (size_t done = 0; done < count; ++i) {
      const AllreducePart& p = parts_[i];
      const size_t offset = begin + done - starts_[i];
      const size_t len = std::min(p.count - offset, count - done);
      if (len == 0) continue;
      KOLO_RETURN_IF_ERROR(f(static_cast<const char*>(p.send) + offset * es_,
                             static_cast<char*>(p.recv) + offset * es_, done, len));
      done += len;
    }
    return Status::OK();
  }

 private:
  const AllreducePart* parts_;
  size_t es_;
  std::vector<size_t>& starts_;
  size_t total_ = 0;
};

}  // namespace

struct ShmNodeReducer::State {
  std::unique_ptr<SharedSegment> segment;
  Communicator* comm = nullptr;  // the node-local communicator the segment belongs to
  int rank = 0, size = 1, owners = 1;
  size_t piece_bytes = 0;
  size_t result_offset = 0;
  size_t small_offset = 0;  // the two small slots, small_slot apart
  size_t small_slot = 0;    // the small path's limit, rounded up to 64
  uint64_t spin_polls = 64;  // polls before the first sched_yield
  uint64_t seq = 0;  // barriers passed on this communicator
  HandoverWatch watch;
  uint64_t probe_seq = 0;  // barriers that may probe (Run's probe_call), the same on every rank
  Status broken;     // once a wait failed the counters disagree: refuse later calls
  std::vector<const char*> sources;  // the owner's operands, one per rank (sized once)
  char* Slot(int r) const { return static_cast<char*>(segment->Region(r)) + kSlotOffset; }
  char* Result(int r) const { return static_cast<char*>(segment->Region(r)) + result_offset; }
  char* Small(int r, uint64_t parity) const {
    return static_cast<char*>(segment->Region(r)) + small_offset + parity * small_slot;
  }
};

ShmNodeReducer::ShmNodeReducer() : piece_bytes_(kDefaultNodePieceBytes), small_bytes_(kAutoSmall) {}
ShmNodeReducer::~ShmNodeReducer() = default;

size_t ShmNodeReducer::SmallBytesFor(int ranks) const {
  if (small_bytes_ != kAutoSmall) return small_bytes_;
  return ranks > OnlineCores() ? kShmSmallBytesSharedCores : kShmSmallBytesOwnCore;
}

StatusOr<ShmNodeReducer::State*> ShmNodeReducer::StateFor(Communicator& local, int owners) {
  auto it = states_.find(&local);
  if (it != states_.end()) {
    if (it->second->owners != owners) {
      return InternalError("shared-memory all-reduce: " + std::to_string(owners) +
                           " slice owners on a segment laid out for " +
                           std::to_string(it->second->owners));
    }
    return it->second.get();
  }
  auto s = std::make_unique<State>();
  s->comm = &local;
  s->rank = local.Rank();
  s->size = local.Size();
  s->owners = owners;
  s->piece_bytes = piece_bytes_;
  s->result_offset = kSlotOffset + RoundUp64(piece_bytes_);
  // The widest slice: up to 8-byte elements, rounded up per slice.
  const size_t result_bytes = RoundUp64(MaxSliceElems(piece_bytes_, owners) + 8);
  s->small_offset = s->result_offset + result_bytes;
  s->small_slot = RoundUp64(SmallBytesFor(s->size));
  // A rank with a core of its own answers a barrier within a microsecond: spinning longer
  // before yielding saves the system call. With more ranks than cores, the peer we wait for
  // may need this very core, so yield early.
  s->spin_polls = OnlineCores() >= s->size ? kSpinPollsOwnCore : kSpinPollsShared;
  s->sources.resize(static_cast<size_t>(s->size));
  // Probing takes a peer that answers at once: only where every rank has a core (unless a test
  // asks). Where StreamCopy is a memcpy there is nothing to choose.
  HandoverWatch::Mode mode = stream_mode_;
  if (mode == HandoverWatch::Mode::kAuto &&
      ((OnlineCores() < s->size && !probe_shared_cores_) || !kStreamCopyStreams)) {
    mode = HandoverWatch::Mode::kPlain;
  }
  s->watch = HandoverWatch(s->size, mode);
  auto segment = local.AllocateShared(s->small_offset + 2 * s->small_slot);
  if (!segment.ok()) {
    Status st = segment.status();
    return st.AddContext("shared-memory all-reduce: allocating the node segment");
  }
  s->segment = std::move(*segment);
  State* raw = s.get();
  states_.emplace(&local, std::move(s));
  return raw;
}

// Every rank publishes the barrier number it reached, then waits until every other rank has
// published at least as much. Spins a little (a peer on another core answers within a
// microsecond), then yields the core (ranks may outnumber cores). Looks at the clock every 1024
// polls: a peer that reported a failure, or that has not arrived within the wait timeout, ends
// the wait with kUnavailable naming it, and this rank reports its own failure in turn so that
// nobody else waits out the timeout.
Status ShmNodeReducer::Barrier(State& s, const char* phase) {
  using Clock = std::chrono::steady_clock;
  const uint64_t target = ++s.seq;
  Counter(s.segment->Region(s.rank), kArrivedOffset)->store(target, std::memory_order_release);
  const auto start = Clock::now();
  const auto deadline = start + wait_timeout_;
  // The peer watch (runtime/peer_watch.h) knows within a second when a peer process is gone.
  auto next_liveness_check = Clock::now() + std::chrono::seconds(1);
  Status alive;
  for (int r = 0; r < s.size; ++r) {
    if (r == s.rank) continue;
    std::atomic<uint64_t>* arrived = Counter(s.segment->Region(r), kArrivedOffset);
    std::atomic<uint64_t>* failed = Counter(s.segment->Region(r), kFailedOffset);
    uint64_t yields = 0;
    for (uint64_t polls = 1; arrived->load(std::memory_order_acquire) < target; ++polls) {
      if (polls <= s.spin_polls) {
        KOLO_CPU_RELAX();
      } else if (++yields <= kYieldsBeforeSleep) {
        sched_yield();
      } else {
        // A peer this late is not running. sched_yield on an otherwise idle core returns at
        // once, so a virtual CPU that shares a physical core with the peer's would keep
        // spinning through its slice; sleeping halts it and lets the peer run.
        std::this_thread::sleep_for(std::chrono::microseconds(
            std::min<uint64_t>(yields - kYieldsBeforeSleep, kMaxSleepMicros)));
      }
      if ((polls & 1023) != 0) continue;
      std::string why;
      const auto now = Clock::now();
      if (now >= next_liveness_check) {
        alive = s.comm->CheckLiveness();
        if (alive.ok()) {
          alive = s.comm->CheckProgress(
              start, "local rank " + std::to_string(r) + " (shared-memory barrier " + phase + ")");
        }
        next_liveness_check = now + std::chrono::seconds(1);
      }
      if (failed->load(std::memory_order_acquire) != 0) {
        why = "local rank " + std::to_string(r) + " gave up on the all-reduce";
      } else if (!alive.ok()) {
        why = alive.message();
      } else if (now >= deadline) {
        why = "local rank " + std::to_string(r) + " of " + std::to_string(s.size) +
              " did not reach the barrier " + phase + " within " +
              std::to_string(wait_timeout_.count()) + " ms (gone, or stuck elsewhere)";
      }
      if (!why.empty()) {
        Counter(s.segment->Region(s.rank), kFailedOffset)->store(1, std::memory_order_release);
        // A frozen peer (the progress check's kDeadlineExceeded) is a stall, not a loss.
        const StatusCode code = !alive.ok() && alive.code() == StatusCode::kDeadlineExceeded
                                    ? StatusCode::kDeadlineExceeded
                                    : StatusCode::kUnavailable;
        s.broken = Status(code, "shared-memory all-reduce on local rank " +
                                    std::to_string(s.rank) + ": " + why);
        return s.broken;
      }
    }
    // A peer that gave up on an earlier collective stays at the barrier number it reached
    // there, which a rank that skipped that collective reaches only now: its counter alone
    // would let this barrier pass, against the slots of another collective.
    if (failed->load(std::memory_order_acquire) != 0) {
      Counter(s.segment->Region(s.rank), kFailedOffset)->store(1, std::memory_order_release);
      s.broken =
          UnavailableError("shared-memory all-reduce on local rank " + std::to_string(s.rank) +
                           ": local rank " + std::to_string(r) + " gave up on the all-reduce");
      return s.broken;
    }
  }
  return Status::OK();
}

// Half a round trip of one cache line between this rank and `peer`, in ns: the lower rank pings,
// the other answers. One round trip to meet, then kBatches batches of kPerBatch, each timed by
// itself; the shortest batch counts (an interrupt or a steal only ever lengthens one). -1 if
// the other side did not answer within kProbeWait (descheduled, or gone: the next barrier
// finds out which). Each value is unique to (probe, trip), so neither side mistakes an earlier
// probe's line for an answer. The two sides time slightly different spans of the same trips,
// so near the threshold their readings may differ; each decides for itself.
int64_t ShmNodeReducer::ProbeHandover(State& s, int peer, uint64_t probe) {
  using Clock = std::chrono::steady_clock;
  constexpr auto kProbeWait = std::chrono::microseconds(50);
  constexpr uint64_t kBatches = 4;
  constexpr uint64_t kPerBatch = HandoverWatch::kRoundTrips / kBatches;
  constexpr uint64_t kTrips = 1 + kBatches * kPerBatch;
  std::atomic<uint64_t>* mine = Counter(s.segment->Region(s.rank), kProbeOffset);
  std::atomic<uint64_t>* theirs = Counter(s.segment->Region(peer), kProbeOffset);
  const bool pinger = s.rank < peer;
  const auto give_up = Clock::now() + kProbeWait;
  auto wait_for = [&](uint64_t value) {
    for (uint64_t polls = 1; theirs->load(std::memory_order_acquire) != value; ++polls) {
      KOLO_CPU_RELAX();
      if ((polls & 63) == 0 && Clock::now() > give_up) return false;
    }
    return true;
  };
  const uint64_t first = probe * kTrips + 1;  // values first .. first + kTrips - 1
  int64_t shortest = -1;
  Clock::time_point batch_start;
  for (uint64_t trip = 0; trip < kTrips; ++trip) {
    const uint64_t value = first + trip;
    if (pinger) {
      mine->store(value, std::memory_order_release);
      if (!wait_for(value)) return -1;
    } else {
      if (!wait_for(value)) return -1;
      mine->store(value, std::memory_order_release);
    }
    // Trip 0 met the other side; a batch is timed from the end of the trip before it.
    if (trip % kPerBatch == 0) {
      const auto now = Clock::now();
      if (trip > 0) {
        const int64_t ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(now - batch_start).count();
        shortest = shortest < 0 ? ns : std::min(shortest, ns);
      }
      batch_start = now;
    }
  }
  return shortest / static_cast<int64_t>(2 * kPerBatch);
}

Status ShmNodeReducer::Run(Communicator& local, const AllreduceArgs& args, int owners,
                           const SliceHook& hook, double postscale) {
  const AllreducePart part{args.send, args.recv, args.count};
  return RunParts(local, &part, 1, args.dtype, args.op, owners, hook, postscale);
}

Status ShmNodeReducer::RunParts(Communicator& local, const AllreducePart* parts, size_t n_parts,
                                DataType dtype, ReduceOp op, int owners, const SliceHook& hook,
                                double postscale) {
  KOLO_RETURN_IF_ERROR(CheckPostscale(dtype, static_cast<bool>(hook), postscale));
  const size_t es = DataTypeSize(dtype);
  const Concatenation all(parts, n_parts, es, &part_starts_);
  const size_t count = all.total();
  if (count == 0) return Status::OK();
  if (owners < 1 || owners > local.Size()) {
    return InternalError("shared-memory all-reduce: " + std::to_string(owners) +
                         " slice owners among " + std::to_string(local.Size()) + " ranks");
  }
  auto state = StateFor(local, owners);
  if (!state.ok()) return state.status();
  State& s = **state;
  if (!s.broken.ok()) return s.broken;

  const size_t piece_elems = s.piece_bytes / es;
  const int mine = s.rank < owners ? s.rank : -1;
  char* my_slot = s.Slot(s.rank);
  char* my_result = s.Result(s.rank);
  std::vector<const char*>& sources = s.sources;
  // What peers read next (my slot, my result) goes through memory when the cores hand lines
  // over slowly (handover_watch.h); decided per call, by this rank alone.
  const bool stream = s.watch.streaming();
  // Every rank makes the same calls with the same sizes and hooks: the same answer on each.
  const bool probe_call = !hook && count * es >= kProbeMinBytes;
  auto copy_in = [stream](void* dst, const void* src, size_t bytes) {
    if (stream) {
      StreamCopy(dst, src, bytes);
    } else {
      std::memcpy(dst, src, bytes);
    }
  };

  for (size_t first = 0; first < count; first += piece_elems) {
    const size_t n = std::min(piece_elems, count - first);
    // Copy in every slice but my own: only I reduce my slice, and I read it from the user's
    // buffers where it is. (Peers cannot read my user buffers: they are in another process.)
    // `from`, `len`: a range of the piece, which goes to the same place in my slot.
    auto gather = [&](size_t from, size_t len) {
      return all.ForEach(first + from, len, [&](const char* send, char*, size_t done, size_t run) {
        copy_in(my_slot + (from + done) * es, send, run * es);
        return Status::OK();
      });
    };
    if (mine < 0) {
      KOLO_RETURN_IF_ERROR(gather(0, n));
    } else {
      const SliceRange own = SliceOf(n, owners, mine);
      const size_t tail = own.offset + own.count;
      KOLO_RETURN_IF_ERROR(gather(0, own.offset));
      KOLO_RETURN_IF_ERROR(gather(tail, n - tail));
    }
    KOLO_RETURN_IF_ERROR(Barrier(s, "after copy-in"));

    // Without a hook the owner's reduced slice is final: its last pass writes it into the
    // owner's output as well as into its result, and the copy-out skips it.
    const bool own_written = mine >= 0 && !hook;
    if (mine >= 0) {
      const SliceRange own = SliceOf(n, owners, mine);
      // Part by part, the slice's runs: each element sees the same operands in the same order
      // as in one buffer, so the bits do not depend on where the parts begin.
      KOLO_RETURN_IF_ERROR(all.ForEach(
          first + own.offset, own.count,
          [&](const char* send, char* recv, size_t at, size_t len) -> Status {
            for (int r = 0; r < s.size; ++r) {
              sources[r] = r == s.rank ? send : s.Slot(r) + (own.offset + at) * es;
            }
            char* result = my_result + at * es;
            // Rank order, the same for every slice: results do not depend on who owns what.
            // The first pass combines the first two operands (no copy of the first). In place,
            // the owner's output run is its own input run, read in an earlier pass or in the
            // last one (ReducePair lets copy equal an operand).
            void* own_out = own_written ? recv : nullptr;
            // The last pass also applies the postscale, so every copy of the result is scaled.
            if (s.size == 1) {
              KOLO_RETURN_IF_ERROR(ScaleCopy(result, sources[0], len, dtype, postscale));
              if (own_out) std::memcpy(own_out, result, len * es);
            }
            // Streamed: the last pass goes to the private output alone, and the result is
            // streamed from there (still in this core's cache) into the segment.
            const bool stream_result = stream && own_out != nullptr && s.size > 1;
            for (int r = 1; r < s.size; ++r) {
              const bool last = r == s.size - 1;
              KOLO_RETURN_IF_ERROR(ReducePairScaled(last && stream_result ? own_out : result,
                                                    r == 1 ? sources[0] : result, sources[r], len,
                                                    dtype, op, last ? postscale : 1.0,
                                                    last && !stream_result ? own_out : nullptr));
            }
            if (stream_result) StreamCopy(result, own_out, len * es);
            return Status::OK();
          }));
      if (hook && own.count) {
        Status h = hook(my_result, own.count, mine);
        if (!h.ok()) {
          // Peers are waiting for this slice: tell them now rather than at their timeout.
          Counter(s.segment->Region(s.rank), kFailedOffset)->store(1, std::memory_order_release);
          s.broken = h;
          return h;
        }
      }
    }
    KOLO_RETURN_IF_ERROR(Barrier(s, "after reduction"));
    // The ranks leave this barrier together (they did the same reduction work), so a probe's
    // two sides meet at once. Only where streaming can matter: large enough calls, no hook.
    if (probe_call) {
      const int peer = s.watch.ProbePeer(s.rank, ++s.probe_seq);
      if (peer >= 0) s.watch.Add(peer, ProbeHandover(s, peer, s.probe_seq));
    }

    for (int k = 0; k < owners; ++k) {
      if (k == mine && own_written) continue;
      const SliceRange sl = SliceOf(n, owners, k);
      const char* result = s.Result(k);
      KOLO_RETURN_IF_ERROR(all.ForEach(first + sl.offset, sl.count,
                                       [&](const char*, char* recv, size_t done, size_t run) {
                                         std::memcpy(recv, result + done * es, run * es);
                                         return Status::OK();
                                       }));
    }
  }
  return Status::OK();
}

Status ShmNodeReducer::RunSmall(Communicator& local, const AllreduceArgs& args, double postscale) {
  const AllreducePart part{args.send, args.recv, args.count};
  return RunSmallParts(local, &part, 1, args.dtype, args.op, postscale);
}

Status ShmNodeReducer::RunSmallParts(Communicator& local, const AllreducePart* parts,
                                     size_t n_parts, DataType dtype, ReduceOp op,
                                     double postscale) {
  KOLO_RETURN_IF_ERROR(CheckPostscale(dtype, false, postscale));
  const size_t es = DataTypeSize(dtype);
  const Concatenation all(parts, n_parts, es, &part_starts_);
  const size_t count = all.total();
  if (count == 0) return Status::OK();
  const size_t bytes = count * es;
  auto state = StateFor(local, local.Size());
  if (!state.ok()) return state.status();
  State& s = **state;
  if (!s.broken.ok()) return s.broken;
  if (bytes > s.small_slot) {
    return InternalError("shared-memory all-reduce: " + std::to_string(bytes) +
                         " bytes on the small path, whose slots hold " +
                         std::to_string(s.small_slot));
  }
  const uint64_t parity = (s.seq + 1) % 2;  // the number of this call's barrier, mod 2
  char* my_small = s.Small(s.rank, parity);
  KOLO_RETURN_IF_ERROR(all.ForEach(0, count, [&](const char* send, char*, size_t at, size_t len) {
    std::memcpy(my_small + at * es, send, len * es);
    return Status::OK();
  }));
  KOLO_RETURN_IF_ERROR(Barrier(s, "after copy-in (small path)"));
  // Every rank: slot 0 op slot 1 op ... in rank order, its own input read back from its slot
  // (in place, the output is the input).
  return all.ForEach(0, count, [&](const char*, char* recv, size_t at, size_t len) -> Status {
    if (s.size == 1) {
      KOLO_RETURN_IF_ERROR(ScaleCopy(recv, s.Small(0, parity) + at * es, len, dtype, postscale));
    }
    for (int r = 1; r < s.size; ++r) {
      KOLO_RETURN_IF_ERROR(ReducePairScaled(recv, r == 1 ? s.Small(0, parity) + at * es : recv,
                                            s.Small(r, parity) + at * es, len, dtype, op,
                                            r == s.size - 1 ? postscale : 1.0));
    }
    return Status::OK();
  });
}

}  // namespace kolo
