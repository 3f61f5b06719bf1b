// One collective of the sweep (allreduce, allgather, broadcast, reducescatter, alltoall) on one
// path, out of place or in place: the call, the inputs each rank writes, and the check of every
// output element against the reference computed locally from every rank's known inputs.
//
//   collective     mpi path                          kolo path (C API, kolo_wait after each call)
//   allreduce      MPI_Allreduce                     kolo_allreduce_async
//   allgather      MPI_Allgather                     kolo_allgather_async, shape [count]
//   broadcast      MPI_Bcast (out of place: the root kolo_broadcast_async
//                  copies input to output first)
//   reducescatter  MPI_Reduce_scatter_block          kolo_reducescatter_async, shape [n*count]
//   alltoall       MPI_Alltoall                      kolo_alltoall_async, equal splits
//
// In place means the input buffer is the output buffer: MPI_IN_PLACE (allgather: this rank's
// part at offset rank*count of the output; reducescatter: the whole input, the result in the
// first count elements; alltoall: the whole input), MPI_Bcast on the one buffer, and kolo's
// `output == input` form for allreduce and broadcast. kolo's allgather, reducescatter and alltoall
// return their output in memory the handle owns (kolo.h: kolo_handle_output); their in-place form
// is nccl-tests' layout with the copy back included in the timed call: allgather reads this rank's
// part of the one buffer (offset rank*count) and the whole output is copied into it;
// reducescatter reads the whole buffer and its result is copied to this rank's part (offset
// rank*count, where nccl-tests puts it; MPI_IN_PLACE puts it at offset 0); alltoall reads the
// whole buffer and the output is copied over it.
//
// Inputs (bench/check.h's patterns, so every value is exact in every dtype and a chunk at the
// wrong offset is caught): allreduce and reducescatter use the -o pattern, the others the sum
// pattern's values; which element holds which value is bench/collective_index.h's table.
#ifndef KOLO_BENCH_COLLECTIVE_H_
#define KOLO_BENCH_COLLECTIVE_H_

#include <cstdint>
#include <string>

#include "bench/check.h"
#include "bench/collective_index.h"
#include "bench/dtypes.h"
#include "bench/harness.h"
#include "bench/stats.h"

namespace kolo::bench {

class CollectiveRunner {
 public:
  CollectiveRunner(const World& world, const MpiAllreducer& mpi, Collective collective,
                   const DtypeInfo& dtype, const OpInfo& op, int root);

  // "sum", ... for reductions, "none" for the others (nccl-tests' redop column).
  std::string OpColumn() const;
  int RootColumn() const;  // the root for broadcast, -1 for the others
  bool exact() const { return pattern_.exact(); }

  // This rank's out-of-place input: layout.send elements.
  void FillInput(void* send, const CollectiveLayout& layout) const;
  // The in-place buffer (layout.recv or .send elements, whichever is larger): this rank's input
  // where the in-place form reads it, the poison pattern where only output goes.
  void FillInPlace(void* buffer, const CollectiveLayout& layout) const;
  // Bytes of the in-place buffer.
  int64_t InPlaceBytes(const CollectiveLayout& layout) const;

  // One call on `path` ("mpi" or "kolo"); in place when send == recv. `capture`: copy an output
  // that kolo keeps in its handle into `recv` (for the checks; not in timed calls).
  void Call(const std::string& path, const void* send, void* recv, const CollectiveLayout& layout,
            const std::string& name, bool capture) const;

  // Wrong elements of this rank's output in `recv` after Call; the first described in *first_bad.
  int64_t CountWrong(const std::string& path, const void* recv, const CollectiveLayout& layout,
                     bool in_place, std::string* first_bad) const;

 private:
  void CallMpi(const void* send, void* recv, const CollectiveLayout& layout) const;
  void CallKolo(const void* send, void* recv, const CollectiveLayout& layout,
                const std::string& name, bool capture) const;
  double Value(const PatternElement& e) const;
  double InputAt(int64_t j, const CollectiveLayout& layout) const;  // of this rank, send index j
  // Where the output starts in `recv` (elements): rank*count for kolo's in-place reducescatter.
  int64_t OutputOffset(const std::string& path, bool in_place,
                       const CollectiveLayout& layout) const;

  const World& world_;
  const MpiAllreducer& mpi_;
  Collective collective_;
  const DtypeInfo& dtype_;
  const OpInfo& op_;
  int root_;
  CheckPattern pattern_;
};

}  // namespace kolo::bench

#endif  // KOLO_BENCH_COLLECTIVE_H_
