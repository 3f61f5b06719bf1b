#include "collectives/host/flat_common.h"

#include <string>

#include "collectives/reduce.h"

namespace kolo::internal {

char* GrowScratch(std::vector<char>* scratch, size_t bytes) {
  if (scratch->size() < bytes) scratch->resize(bytes);
  return scratch->data();
}

Status SupportsKernelOp(std::string_view algorithm, const SelectionInput& in) {
  switch (in.op) {
    case ReduceOp::kSum:
    case ReduceOp::kMin:
    case ReduceOp::kMax:
    case ReduceOp::kProduct:
      return Status::OK();
    default:
      return UnimplementedError(std::string(algorithm) +
                                " reduces with the kernels, which have no " +
                                std::string(ReduceOpName(in.op)));
  }
}

int FloorLog2(int p) {
  int k = 0;
  while ((2 << k) <= p) ++k;
  return k;
}

double HalvingDoublingMicros(const SelectionInput& in, int pof2) {
  double t = 0;
  double half = static_cast<double>(in.bytes) / 2;
  for (int d = 1; d < pof2; d <<= 1, half /= 2) {
    const LinkCost& link = StepLink(in, d);
    t += 2 * link.alpha_us + 2 * half * link.beta_us + half * in.cost->gamma_us;
  }
  return t;
}

Pof2Fold Pof2Fold::Of(int rank, int size) {
  Pof2Fold f;
  f.pof2 = 1 << FloorLog2(size);
  f.rem = size - f.pof2;
  if (rank < 2 * f.rem) {
    f.newrank = rank % 2 == 0 ? rank / 2 : -1;
  } else {
    f.newrank = rank - f.rem;
  }
  return f;
}

Status FoldIn(Communicator& comm, const Pof2Fold& fold, char* buf, char* tmp, size_t count,
              DataType dtype, ReduceOp op, int tag) {
  const int rank = comm.Rank();
  if (rank >= 2 * fold.rem) return Status::OK();
  const size_t bytes = count * DataTypeSize(dtype);
  if (rank % 2 == 1) {
    return comm.SendRecv(buf, bytes, rank - 1, nullptr, 0, rank - 1, tag)
        .AddContext("fold: sending to rank " + std::to_string(rank - 1));
  }
  KOLO_RETURN_IF_ERROR(comm.SendRecv(nullptr, 0, rank + 1, tmp, bytes, rank + 1, tag)
                           .AddContext("fold: receiving from rank " + std::to_string(rank + 1)));
  // The even (lower) rank's data on the left: the fixed order every step of these algorithms
  // uses, so a combination never depends on which side computed it.
  return ReduceInto(buf, tmp, count, dtype, op);
}

Status FoldOut(Communicator& comm, const Pof2Fold& fold, char* buf, size_t bytes, int tag) {
  const int rank = comm.Rank();
  if (rank >= 2 * fold.rem) return Status::OK();
  if (rank % 2 == 0) {
    return comm.SendRecv(buf, bytes, rank + 1, nullptr, 0, rank + 1, tag)
        .AddContext("unfold: sending the result to rank " + std::to_string(rank + 1));
  }
  return comm.SendRecv(nullptr, 0, rank - 1, buf, bytes, rank - 1, tag)
      .AddContext("unfold: receiving the result from rank " + std::to_string(rank - 1));
}

}  // namespace kolo::internal
