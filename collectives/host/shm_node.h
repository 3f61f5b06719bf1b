// The shared-memory engine of the node-level all-reduces: one segment per node communicator,
// allocated on the first call and reused, flag barriers on sequence counters, and the piece loop
// "copy in, barrier, owners reduce their slice in rank order, barrier, everyone copies out"
// (without a hook an owner's reduction also stores its slice into its own output, and its
// copy-out skips that slice).
// shm_allreduce.h runs it with every rank owning a slice; hierarchical_allreduce.h runs it with
// the first `owners` local ranks owning one slice each and a hook that all-reduces each owner's
// slice across nodes before the copy-out. The algorithm prose (steps, bytes, costs) is in
// shm_allreduce.h.
//
// Segment, per rank r (Region(r), 64-byte aligned, zero-filled):
//   [0, 64)          arrived: std::atomic<uint64_t>, the last barrier rank r reached
//   [64, 128)        failed:  std::atomic<uint64_t>, non-zero once rank r gave up (error)
//   [128, 192)       probe:   std::atomic<uint64_t>, the handover watch's ping-pong line
//   [192, +P)        input slot: rank r's copy of the current piece (P = piece bytes)
//   [192+P, +R)      result: rank r's reduced slice (R = the largest slice, rounded to 64)
//   [192+P+R, +2Q)   small slots 0 and 1 (Q = the small path's limit, rounded to 64)
// One input slot suffices: a rank writes piece k+1 into its slot only after the second barrier
// of piece k, by which time every reader of piece k's slots has finished its reduction; the
// results live apart from the slots, so copy-out of piece k (after that barrier) never races
// with copy-in of piece k+1, and the result area is rewritten only after the first barrier of
// piece k+1, which every rank reaches after its copy-out of piece k.
//
// The small path (RunSmall, messages of at most Q bytes): ONE barrier per call. Every rank
// copies its whole input into its small slot of parity b % 2, where b is the number of the
// call's barrier (the same on every rank: all ranks make the same calls in the same order), then
// the barrier, then every rank reduces all p small slots of that parity in rank order straight
// into its output: the same operands in the same order on every rank, so identical bits.
// Why two slots are enough: rank r rewrites the slot of parity q in the call whose barrier is b
// only after it passed barrier b-1 (it passes barriers in order). Every rank arrives at b-1 only
// after finishing the call before it, and the last call that used parity q had a barrier of at
// most b-2, so all of its readers are done. With a single slot the barrier of call b-1 would
// not help: a slow rank may still be reading call b-1's slots when a fast one, past that
// barrier, starts writing call b's input. The small slots lie apart from the input slot and
// the results, so a small call after a pieced call (or before one) touches nothing the other
// may still read: the pieced path reads slots only between its two barriers and results only
// after its second, both passed by everyone before the next call starts writing.
#ifndef KOLO_COLLECTIVES_HOST_SHM_NODE_H_
#define KOLO_COLLECTIVES_HOST_SHM_NODE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "collectives/algorithm.h"
#include "collectives/host/handover_watch.h"

namespace kolo {

class ShmNodeReducer {
 public:
  // Called on an owner with its reduced slice (in the segment) before anyone copies it out;
  // `slice` is the owner's index, `count` elements of the call's dtype. May rewrite the slice.
  // Must not call back into this reducer: the call it is part of keeps scratch here.
  using SliceHook = std::function<Status(void* data, size_t count, int slice)>;

  ShmNodeReducer();
  ~ShmNodeReducer();

  // All-reduces args over `local` (every rank of one node, all calling with the same count,
  // dtype, op and owners). The first call on a communicator allocates its segment (collective).
  // owners: 1..local.Size(); local ranks [0, owners) own one slice each. `postscale`: the
  // result comes out multiplied by it (ReducePairScaled in the owner's last pass, so the
  // copy-out copies scaled values); float32/float64 without a hook only, else it must be 1.
  Status Run(Communicator& local, const AllreduceArgs& args, int owners, const SliceHook& hook,
             double postscale = 1.0);
  // Run over the concatenation of parts[0, n) (every rank the same counts), read and written
  // in the parts' own buffers: the pieces and slices are cut from the concatenation and copied
  // in and out part by part, so the result has the bits of Run over one buffer holding it all.
  Status RunParts(Communicator& local, const AllreducePart* parts, size_t n, DataType dtype,
                  ReduceOp op, int owners, const SliceHook& hook, double postscale = 1.0);

  // The one-barrier path for messages of at most small_bytes() (see the top of this file): every
  // rank reads all p inputs, so it pays p n of reduction traffic to save a barrier. `local` as
  // for Run, every rank owning the result; `postscale` as for Run.
  Status RunSmall(Communicator& local, const AllreduceArgs& args, double postscale = 1.0);
  // RunSmall over the concatenation of `parts`, as RunParts is to Run.
  Status RunSmallParts(Communicator& local, const AllreducePart* parts, size_t n, DataType dtype,
                       ReduceOp op, double postscale = 1.0);

  // Test knobs: smaller pieces force the many-piece paths on small buffers; a shorter wait
  // makes the dead-peer test fast. Must be set the same on every rank before its first Run.
  void set_piece_bytes(size_t bytes) { piece_bytes_ = (bytes + 7) / 8 * 8; }
  void set_wait_timeout(std::chrono::milliseconds t) { wait_timeout_ = t; }
  // Largest message of the one-barrier path (0: never), instead of SmallBytesFor's choice.
  // Set before the first Run on a communicator: its slots are sized then.
  void set_small_bytes(size_t bytes) { small_bytes_ = bytes; }
  // Stream what peers read next always, never, or as the handover watch decides (default;
  // handover_watch.h). Set before the first Run on a communicator.
  // The algorithm registry sets KOLO_SHM_STORES's choice (MakeAllreduceAlgorithms).
  void set_stream_mode(HandoverWatch::Mode mode) { stream_mode_ = mode; }
  HandoverWatch::Mode stream_mode() const { return stream_mode_; }
  // Probe (kAuto) even where ranks outnumber cores: tests of the probe on thread worlds.
  void set_probe_shared_cores(bool probe) { probe_shared_cores_ = probe; }
  // The one-barrier path's limit for a node of `ranks` ranks: kShmSmallBytesOwnCore when each
  // rank can have a core of this host, kShmSmallBytesSharedCores when they outnumber the cores
  // (node_pieces.h). The ranks of one node share the host, so every rank gets the same answer.
  size_t SmallBytesFor(int ranks) const;
  size_t piece_bytes() const { return piece_bytes_; }

 private:
  struct State;
  StatusOr<State*> StateFor(Communicator& local, int owners);
  Status Barrier(State& s, const char* phase);
  // The handover watch's ping-pong with `peer` right after a barrier (handover_watch.h).
  int64_t ProbeHandover(State& s, int peer, uint64_t probe);

  size_t piece_bytes_;
  size_t small_bytes_;  // kAutoSmall: SmallBytesFor decides
  HandoverWatch::Mode stream_mode_ = HandoverWatch::Mode::kAuto;
  bool probe_shared_cores_ = false;
  std::chrono::milliseconds wait_timeout_{60000};
  // One thread at a time per reducer (the runtime's background thread; a thread or process per
  // rank in the tests): calls write its scratch (part_starts_, each State's sources).
  // By communicator: an algorithm instance may serve several (process sets). Keyed by address,
  // so an instance must not outlive the communicators it ran on (the runtime's selector and its
  // communicators live and die together).
  std::map<const Communicator*, std::unique_ptr<State>> states_;
  // Where each part of a call starts in the concatenation (scratch kept between calls, so that a
  // call allocates nothing once the reducer has seen as many parts).
  std::vector<size_t> part_starts_;
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_HOST_SHM_NODE_H_
