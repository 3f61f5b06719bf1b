// How kolo lays out the NCCL calls of the collectives NCCL has no "v" (unequal parts) form of.
// Pure arithmetic, no NCCL: unit-tested on any machine (tests/unit/nccl_plan_test.cc).
//
// allgatherv: NCCL has ncclAllGather (equal parts) only. With equal parts kolo calls it; with
//   unequal ones it issues, in one ncclGroupStart/End, an ncclBroadcast per rank r from r of
//   its part into recv + offsets[r] (Horovod's NCCLAllgather does the same). Chosen over grouped
//   ncclSend/ncclRecv because each broadcast is NCCL's pipelined ring: every rank sends about n
//   bytes in total whatever the sizes (the ring all-gather's n(p-1)/p), where all-pairs
//   send/recv makes rank r push its part p-1 times over its own links and opens a p2p connection
//   (with its buffers) to every peer. Zero-byte parts are left out on every rank alike.
// reducescatter: ncclReduceScatter needs equal parts; Horovod splits n rows as n/p each plus
//   one for the first n%p ranks, so parts differ by at most one row. kolo pads: part r of the
//   input is staged at slot r (of `padded` = max part elements) of a buffer of p * padded
//   elements, the padding zeroed, and one ncclReduceScatter of `padded` elements per rank
//   reduces it; rank r keeps the first counts[r] elements of its slot. Chosen over an ncclReduce
//   per part in a group: one collective, NCCL's tuned reduce-scatter, for at most one extra row
//   per rank on the wire (negligible once n >> p) and a device copy of the input (HBM speed,
//   fused with the prescale, so a prescaled reduce-scatter copies once either way).
#ifndef KOLO_COLLECTIVES_NCCL_NCCL_PLAN_H_
#define KOLO_COLLECTIVES_NCCL_NCCL_PLAN_H_

#include <cstddef>
#include <vector>

namespace kolo {

// offsets[r] = parts[0] + ... + parts[r-1]; one more entry at the end: the total.
std::vector<size_t> PartOffsets(const std::vector<size_t>& parts);

// Whether every part is the same size (true for no parts).
bool EqualParts(const std::vector<size_t>& parts);

struct ReducescatterPlan {
  std::vector<size_t> counts;   // elements of rank r's part (what rank r receives)
  std::vector<size_t> offsets;  // where part r starts in every rank's input, elements
  size_t padded = 0;            // elements per rank given to ncclReduceScatter: max(counts)
  bool staged = false;          // parts unequal: the input is laid out in padded slots first
  // Where part r goes in the staged buffer (elements); the buffer holds ranks * padded.
  size_t Slot(int r) const { return static_cast<size_t>(r) * padded; }
};

ReducescatterPlan PlanReducescatter(const std::vector<size_t>& counts);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_NCCL_NCCL_PLAN_H_
