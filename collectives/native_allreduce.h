// The library's own all-reduce (MPI_Allreduce over the MPI backend; the reference reduction of
// the loopback backend in the thread world), behind the AllreduceAlgorithm interface.
//
// Cost: the library chooses its own algorithm internally (Open MPI's tuned component picks
// recursive doubling, ring or Rabenseifner by size); we model it as Rabenseifner's
// (Thakur, Rabenseifner & Gropp 2005, sec. 4.4): 2 log2(p) alpha + 2 (p-1)/p n (beta + gamma/2).
#ifndef KOLO_COLLECTIVES_NATIVE_ALLREDUCE_H_
#define KOLO_COLLECTIVES_NATIVE_ALLREDUCE_H_

#include "collectives/algorithm.h"

namespace kolo {

class NativeAllreduce : public AllreduceAlgorithm {
 public:
  std::string_view Name() const override { return "mpi"; }
  Status Supports(const SelectionInput& in) const override;
  double EstimateMicros(const SelectionInput& in) const override;
  Status Run(Communicator& comm, const AllreduceArgs& args) override;
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_NATIVE_ALLREDUCE_H_
