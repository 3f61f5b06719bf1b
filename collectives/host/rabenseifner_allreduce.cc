#include "collectives/host/rabenseifner_allreduce.h"

#include <cstring>
#include <string>
#include <utility>

#include "collectives/host/flat_common.h"
#include "collectives/reduce.h"

namespace kolo {
namespace {

constexpr int kRabenseifnerFoldTag = 0x6b75;
constexpr int kRabenseifnerHalvingTag = 0x6b76;
constexpr int kRabenseifnerDoublingTag = 0x6b77;

// A window of blocks [lo, hi) of a vector cut into `blocks` blocks, in elements.
struct Blocks {
  size_t count, blocks;
  size_t First(int lo) const { return internal::BlockOffset(count, blocks, lo); }
  size_t Count(int lo, int hi) const { return First(hi) - First(lo); }
};

}  // namespace

Status RabenseifnerAllreduce::Supports(const SelectionInput& in) const {
  return internal::SupportsKernelOp(Name(), in);
}

double RabenseifnerAllreduce::EstimateMicros(const SelectionInput& in) const {
  if (in.ranks <= 1) return 0;
  const double n = static_cast<double>(in.bytes);
  const int k = internal::FloorLog2(in.ranks);
  double t = internal::HalvingDoublingMicros(in, 1 << k);  // distance 1 first, as Run does
  if (in.ranks != (1 << k)) {
    const LinkCost& link = FlatLink(in);
    t += 2 * link.alpha_us + 2 * n * link.beta_us + n * in.cost->gamma_us;
  }
  return t;
}

Status RabenseifnerAllreduce::Run(Communicator& comm, const AllreduceArgs& args) {
  const size_t esize = DataTypeSize(args.dtype);
  const size_t bytes = args.count * esize;
  char* buf = static_cast<char*>(args.recv);
  if (args.send != args.recv && bytes) std::memcpy(buf, args.send, bytes);
  const int p = comm.Size();
  if (p == 1 || bytes == 0) return Status::OK();

  const internal::Pof2Fold fold = internal::Pof2Fold::Of(comm.Rank(), p);
  char* tmp = internal::GrowScratch(&scratch_, bytes);
  KOLO_RETURN_IF_ERROR(
      internal::FoldIn(comm, fold, buf, tmp, args.count, args.dtype, args.op, kRabenseifnerFoldTag)
          .AddContext("rabenseifner"));
  if (fold.newrank >= 0) {
    const Blocks b{args.count, static_cast<size_t>(fold.pof2)};
    // The window before each halving step, for the all-gather to walk back up.
    struct Window {
      int lo, hi;
    };
    Window path[32];
    int lo = 0, hi = fold.pof2, steps = 0;
    // `mine` holds this rank's partial results for the window; `other` receives.
    char* mine = buf;
    char* other = tmp;
    for (int d = 1; d < fold.pof2; d <<= 1, ++steps) {
      const int partner_new = fold.newrank ^ d;
      const int partner = fold.RealRank(partner_new);
      const bool lower = fold.newrank < partner_new;
      const int mid = lo + (hi - lo) / 2;
      const int keep_lo = lower ? lo : mid, keep_hi = lower ? mid : hi;
      const int give_lo = lower ? mid : lo, give_hi = lower ? hi : mid;
      const size_t keep_at = b.First(keep_lo) * esize, keep_n = b.Count(keep_lo, keep_hi);
      const std::string where = "rabenseifner reduce-scatter step " + std::to_string(steps + 1) +
                                " with rank " + std::to_string(partner);
      KOLO_RETURN_IF_ERROR(
          comm.SendRecv(mine + b.First(give_lo) * esize, b.Count(give_lo, give_hi) * esize, partner,
                        other + keep_at, keep_n * esize, partner, kRabenseifnerHalvingTag)
              .AddContext(where));
      if (lower) {
        KOLO_RETURN_IF_ERROR(
            ReduceInto(mine + keep_at, other + keep_at, keep_n, args.dtype, args.op)
                .AddContext(where));
      } else {
        KOLO_RETURN_IF_ERROR(
            ReduceInto(other + keep_at, mine + keep_at, keep_n, args.dtype, args.op)
                .AddContext(where));
        std::swap(mine, other);
      }
      path[steps] = {lo, hi};
      lo = keep_lo;
      hi = keep_hi;
    }
    if (mine != buf) {
      std::memcpy(buf + b.First(lo) * esize, mine + b.First(lo) * esize, b.Count(lo, hi) * esize);
    }
    for (int d = fold.pof2 >> 1; d >= 1; d >>= 1) {
      const Window parent = path[--steps];
      const int partner = fold.RealRank(fold.newrank ^ d);
      // The sibling of [lo, hi) inside the parent window.
      const int sib_lo = lo == parent.lo ? hi : parent.lo;
      const int sib_hi = lo == parent.lo ? parent.hi : lo;
      KOLO_RETURN_IF_ERROR(comm.SendRecv(buf + b.First(lo) * esize, b.Count(lo, hi) * esize,
                                         partner, buf + b.First(sib_lo) * esize,
                                         b.Count(sib_lo, sib_hi) * esize, partner,
                                         kRabenseifnerDoublingTag)
                               .AddContext("rabenseifner all-gather step " +
                                           std::to_string(internal::FloorLog2(fold.pof2) - steps) +
                                           " with rank " + std::to_string(partner)));
      lo = parent.lo;
      hi = parent.hi;
    }
  }
  return internal::FoldOut(comm, fold, buf, bytes, kRabenseifnerFoldTag).AddContext("rabenseifner");
}

}  // namespace kolo
