#include "collectives/host/recursive_doubling_allreduce.h"

#include <cstring>
#include <string>
#include <utility>

#include "collectives/host/flat_common.h"
#include "collectives/reduce.h"

namespace kolo {
namespace {
constexpr int kRdTag = 0x6b74;
}  // namespace

Status RecursiveDoublingAllreduce::Supports(const SelectionInput& in) const {
  return internal::SupportsKernelOp(Name(), in);
}

double RecursiveDoublingAllreduce::EstimateMicros(const SelectionInput& in) const {
  if (in.ranks <= 1) return 0;
  const double n = static_cast<double>(in.bytes);
  const int k = internal::FloorLog2(in.ranks);
  double t = 0;
  for (int d = 1; d < (1 << k); d <<= 1) {  // nearest partner first, as Run pairs them
    const LinkCost& link = StepLink(in, d);
    t += link.alpha_us + n * link.beta_us + n * in.cost->gamma_us;
  }
  if (in.ranks != (1 << k)) {  // fold in and out: over the flat link
    const LinkCost& link = FlatLink(in);
    t += 2 * (link.alpha_us + n * link.beta_us) + n * in.cost->gamma_us;
  }
  return t;
}

Status RecursiveDoublingAllreduce::Run(Communicator& comm, const AllreduceArgs& args) {
  const size_t bytes = args.count * DataTypeSize(args.dtype);
  char* buf = static_cast<char*>(args.recv);
  if (args.send != args.recv && bytes) std::memcpy(buf, args.send, bytes);
  const int p = comm.Size();
  if (p == 1 || bytes == 0) return Status::OK();

  const internal::Pof2Fold fold = internal::Pof2Fold::Of(comm.Rank(), p);
  char* tmp = internal::GrowScratch(&scratch_, bytes);
  KOLO_RETURN_IF_ERROR(
      internal::FoldIn(comm, fold, buf, tmp, args.count, args.dtype, args.op, kRdTag)
          .AddContext("recursive doubling"));
  if (fold.newrank >= 0) {
    // `mine` holds this rank's running result, `other` receives the partner's; when the
    // partner is the lower rank the result is computed into `other` and the two swap roles,
    // so no step copies.
    char* mine = buf;
    char* other = tmp;
    for (int d = 1, step = 1; d < fold.pof2; d <<= 1, ++step) {
      const int partner_new = fold.newrank ^ d;
      const int partner = fold.RealRank(partner_new);
      const std::string where = "recursive doubling step " + std::to_string(step) + " with rank " +
                                std::to_string(partner);
      KOLO_RETURN_IF_ERROR(
          comm.SendRecv(mine, bytes, partner, other, bytes, partner, kRdTag).AddContext(where));
      if (fold.newrank < partner_new) {
        KOLO_RETURN_IF_ERROR(
            ReduceInto(mine, other, args.count, args.dtype, args.op).AddContext(where));
      } else {
        KOLO_RETURN_IF_ERROR(
            ReduceInto(other, mine, args.count, args.dtype, args.op).AddContext(where));
        std::swap(mine, other);
      }
    }
    if (mine != buf) std::memcpy(buf, mine, bytes);
  }
  return internal::FoldOut(comm, fold, buf, bytes, kRdTag).AddContext("recursive doubling");
}

}  // namespace kolo
