// Shared-memory direct all-reduce ("shm"): the ranks of one node reduce through a segment that
// every one of them maps, instead of sending messages. It is the reduce-scatter + all-gather
// of Rabenseifner (Thakur, Rabenseifner & Gropp 2005, sec. 4.4) with the exchanges replaced by
// loads from peers' memory: rank i reduces slice i (1/p of the data) straight out of every
// rank's copy, and every rank then reads every reduced slice.
//
// Per piece of at most P bytes (2 MiB; ShmNodeReducer, shm_node.h, holds the segment layout):
//
//   step | rank i does                                                  | then
//   -----+-------------------------------------------------------------+----------------
//   1    | copy its piece of the input into its slot, all slices but i | barrier (flags)
//   2    | result_i = slot_0[i] op slot_1[i] op ... op slot_{p-1}[i],  | barrier (flags)
//        | rank order, its own slice read from its own input; the last |
//        | pass stores result_i into its output's slice i as well      |
//   3    | copy every other rank's result_j into its output            | next piece
//
// Only rank i reads slice i of any slot, and it reads slice i of its own input in place, so
// that slice is never copied in. Everything else has to be: a process cannot load from another
// process's user buffer, only from the segment. The thread world, where every user buffer is
// readable, takes the very same path (one code path, tested by the unit suite and under mpirun).
// Each element is reduced by exactly one rank, in rank order, so every rank gets the same bits
// and the result does not depend on p's slicing.
//
// Barriers are per-rank sequence counters in the segment (one cache line each): spin briefly,
// then sched_yield (ranks may outnumber cores); a peer that never arrives ends the wait with
// kUnavailable naming it after 60 s, and the failing rank raises a flag so the others stop too.
//
// Stores into the slots and results are plain, or streamed (StreamCopy: past the cache, into
// memory) while the cores hand cache lines over slowly, as they do when the host places them
// behind separate last-level caches: there every line a plain store takes from, or leaves
// for, the other core is a round trip between the caches, and plain stores run the whole
// all-reduce 4-10x slower. Streamed, the owner's last pass goes into its output alone and is
// streamed from there into its result. Each rank decides alone, from a ping-pong with a peer
// after every 8th piece of calls of 64 KiB or more (handover_watch.h); the bits do not depend
// on it. KOLO_SHM_STORES=plain|streamed fixes the choice.
//
// Bytes moved per rank, message n: copy in n(p-1)/p each way; the reduction's p-1 passes read
// 2n(p-1)/p and write n (ReducePair: the first pass combines the first two operands with no
// copy of the first, the last stores into the result and the output at once); copy out
// n(p-1)/p each way. That is n(4p-4)/p read and n(3p-2)/p written (2n each way at p = 2),
// against 2n(p-1)/p sent plus the same received (and MPI's own copies) for a message-passing
// ring. Copying the first operand, reducing into the result and copying every result out, as
// this path did before, read n(4p-2)/p and wrote n(3p-1)/p (3n and 2.5n at p = 2;
// docs/benchmarks.md, "One pass fewer"). Streamed, the last pass writes the output alone and
// the result is read back from it (n/p more read, from cache) to be streamed into the segment.
// A list of tensors (RunList: a fused response, which the executor then does not pack) runs as
// their concatenation: the pieces and slices are ranges of it, each copied in, reduced and
// copied out part by part where the tensors lie, so a fused step of many tensors shares its
// pieces and barriers as one buffer would, with no fusion buffer and its two passes.
// Small messages (n <= ShmNodeReducer::SmallBytesFor(p): 2 KiB with a core per rank, 16 KiB
// with more ranks than cores) take the one-barrier path instead: every rank copies all of its
// input into a slot, one barrier, every rank reduces all p slots in rank order (shm_node.h).
//
// Cost (in.cost, Hockney alpha-beta-gamma with the barrier as alpha and memory as beta):
//   small: T = sync_us + 2 n copy_us + (p-1) n gamma_us
//   else:  T = n CopyUs(2 p n) + n copy_us + (p-1)/p n gamma_us + 2 ceil(n/P) sync_us
// CopyUs(2pn) is one memcpy's worth (the input read, the output written) at the rate of a
// working set of the node's p inputs and outputs: in-cache copy_us while it fits the last-level
// cache, tending to copy_mem_us past it; the slots and results stay in cache (copy_us, gamma_us).
#ifndef KOLO_COLLECTIVES_HOST_SHM_ALLREDUCE_H_
#define KOLO_COLLECTIVES_HOST_SHM_ALLREDUCE_H_

#include "collectives/algorithm.h"
#include "collectives/host/shm_node.h"

namespace kolo {

class ShmAllreduce : public AllreduceAlgorithm {
 public:
  std::string_view Name() const override { return "shm"; }
  Status Supports(const SelectionInput& in) const override;
  double EstimateMicros(const SelectionInput& in) const override;
  Status Run(Communicator& comm, const AllreduceArgs& args) override;
  // A fused response's tensors are copied into the slots and out of the results where they
  // are, as the slices of one buffer: no fusion buffer, so none of its packing passes.
  bool RunsLists(DataType dtype) const override { return !IsHalf(dtype); }
  Status RunList(Communicator& comm, const std::vector<AllreducePart>& parts, DataType dtype,
                 ReduceOp op, double postscale) override;

  ShmNodeReducer& reducer() { return reducer_; }  // tests: piece size, wait timeout

 protected:
  // float32/float64: the owners' last pass (ReducePairScaled) multiplies, so Average costs no
  // pass of its own.
  bool ScalesInItsOwnPass() const override { return true; }
  Status RunWithPostscale(Communicator& comm, const AllreduceArgs& args, double postscale) override;

 private:
  ShmNodeReducer reducer_;
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_HOST_SHM_ALLREDUCE_H_
