#include "collectives/host/adasum_allreduce.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>

#include "collectives/host/flat_common.h"
#include "collectives/reduce.h"

namespace kolo {
namespace {

constexpr int kAdasumHalvingTag = 0x7a00;
constexpr int kAdasumSumTag = 0x7a01;
constexpr int kAdasumDoublingTag = 0x7a02;

// Horovod's threshold: a squared norm below it counts as zero and its coefficient is 1.
const double kTinyNormSq = std::sqrt(DBL_MIN);

// Elements as double, for the three dtypes Adasum takes; float16 travels as its bits.
template <typename T>
struct Elem {
  static double Load(const void* p, size_t i) { return static_cast<const T*>(p)[i]; }
  static void Store(void* p, size_t i, double v) { static_cast<T*>(p)[i] = static_cast<T>(v); }
};
template <>
struct Elem<uint16_t> {
  static double Load(const void* p, size_t i) {
    return HalfToFloat(static_cast<const uint16_t*>(p)[i]);
  }
  static void Store(void* p, size_t i, double v) {
    static_cast<uint16_t*>(p)[i] = FloatToHalf(static_cast<float>(v));
  }
};

// The two passes over a kept half, per tensor piece.
struct Kernels {
  // sums[0] += a.b, sums[1] += |a|^2, sums[2] += |b|^2 over n elements.
  void (*dot_and_norms)(const void* a, const void* b, size_t n, double* sums);
  // a = ca * a + cb * b over n elements.
  void (*combine)(void* a, const void* b, size_t n, double ca, double cb);
};

template <typename T>
void DotAndNorms(const void* a, const void* b, size_t n, double* sums) {
  double dot = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < n; ++i) {
    const double x = Elem<T>::Load(a, i), y = Elem<T>::Load(b, i);
    dot += x * y;
    aa += x * x;
    bb += y * y;
  }
  sums[0] += dot;
  sums[1] += aa;
  sums[2] += bb;
}

template <typename T>
void Combine(void* a, const void* b, size_t n, double ca, double cb) {
  for (size_t i = 0; i < n; ++i) {
    Elem<T>::Store(a, i, ca * Elem<T>::Load(a, i) + cb * Elem<T>::Load(b, i));
  }
}

template <typename T>
Kernels KernelsOf() {
  return {&DotAndNorms<T>, &Combine<T>};
}

bool AdasumDtype(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kFloat32 || t == DataType::kFloat64;
}

Kernels KernelsFor(DataType t) {
  if (t == DataType::kFloat16) return KernelsOf<uint16_t>();
  if (t == DataType::kFloat32) return KernelsOf<float>();
  return KernelsOf<double>();
}

Status CheckOpAndType(ReduceOp op, DataType dtype) {
  if (op != ReduceOp::kAdasum) {
    return UnimplementedError("adasum combines with Adasum only, not " +
                              std::string(ReduceOpName(op)));
  }
  if (!AdasumDtype(dtype)) {
    return UnimplementedError("adasum runs on float16, float32 and float64, not " +
                              std::string(DataTypeName(dtype)));
  }
  return Status::OK();
}

// A window [lo, hi) of the buffer, in elements.
struct Window {
  size_t lo, hi;
};

// Where each tensor starts in the fused buffer, and the piece of it inside a window.
class TensorLayout {
 public:
  explicit TensorLayout(const std::vector<size_t>& counts) : starts_(counts.size() + 1, 0) {
    for (size_t t = 0; t < counts.size(); ++t) starts_[t + 1] = starts_[t] + counts[t];
  }
  size_t tensors() const { return starts_.size() - 1; }
  size_t total() const { return starts_.back(); }
  // Tensor t's elements inside w: [*first, *first + return value).
  size_t Piece(size_t t, Window w, size_t* first) const {
    *first = std::max(w.lo, starts_[t]);
    const size_t end = std::min(w.hi, starts_[t + 1]);
    return end > *first ? end - *first : 0;
  }

 private:
  std::vector<size_t> starts_;
};

std::string Where(const char* phase, int level, int levels, int partner) {
  return std::string("adasum ") + phase + " level " + std::to_string(level) + "/" +
         std::to_string(levels) + " with rank " + std::to_string(partner);
}

}  // namespace

Status CheckAdasumRanks(int ranks) {
  if (ranks >= 1 && (ranks & (ranks - 1)) == 0) return Status::OK();
  return UnimplementedError(
      "Adasum needs a power-of-two number of ranks (1, 2, 4, 8, ...); "
      "this job has " +
      std::to_string(ranks));
}

Status AdasumAllreduce::Supports(const SelectionInput& in) const {
  KOLO_RETURN_IF_ERROR(CheckOpAndType(in.op, in.dtype));
  if (in.memory != MemoryKind::kHost) {
    return UnimplementedError("adasum runs on host buffers, not " +
                              std::string(MemoryKindName(in.memory)));
  }
  return CheckAdasumRanks(in.ranks);
}

double AdasumAllreduce::EstimateMicros(const SelectionInput& in) const {
  if (in.ranks <= 1) return 0;
  const double p = in.ranks;
  const double k = internal::FloorLog2(in.ranks);
  const double n = static_cast<double>(in.bytes);
  const LinkCost& link = FlatLink(in);
  return (2 * k + k * (k + 1) / 2) * link.alpha_us + 2 * (p - 1) / p * n * link.beta_us +
         2 * (p - 1) / p * n * in.cost->gamma_us;
}

Status AdasumAllreduce::Run(Communicator& comm, const AllreduceArgs& args) {
  return RunFused(comm, args, {args.count});
}

Status AdasumAllreduce::RunFused(Communicator& comm, const AllreduceArgs& args,
                                 const std::vector<size_t>& tensor_counts) {
  KOLO_RETURN_IF_ERROR(CheckOpAndType(args.op, args.dtype));
  const int p = comm.Size();
  KOLO_RETURN_IF_ERROR(CheckAdasumRanks(p));
  const TensorLayout layout(tensor_counts);
  if (layout.total() != args.count) {
    return InvalidArgumentError("adasum: the tensor counts add up to " +
                                std::to_string(layout.total()) + " elements, the buffer has " +
                                std::to_string(args.count));
  }
  const size_t esize = DataTypeSize(args.dtype);
  char* buf = static_cast<char*>(args.recv);
  if (args.send != args.recv && args.count) std::memcpy(buf, args.send, args.count * esize);
  if (p == 1 || args.count == 0) return Status::OK();

  const Kernels kernels = KernelsFor(args.dtype);
  const int rank = comm.Rank();
  const int levels = internal::FloorLog2(p);
  // The first level keeps the most: ceil(n / 2) elements.
  char* theirs = internal::GrowScratch(&scratch_, (args.count + 1) / 2 * esize);
  sums_.resize(3 * layout.tensors());
  peer_sums_.resize(sums_.size());

  Window path[32];  // the window before each halving level, for the doubling to walk back
  Window w{0, args.count};
  int level = 0;
  for (int d = 1; d < p; d <<= 1, ++level) {
    const int partner = rank ^ d;
    const bool left = (rank & d) == 0;
    const size_t mid = w.lo + (w.hi - w.lo) / 2;
    const Window keep = left ? Window{w.lo, mid} : Window{mid, w.hi};
    const Window give = left ? Window{mid, w.hi} : Window{w.lo, mid};
    const std::string where = Where("halving", level + 1, levels, partner);
    KOLO_RETURN_IF_ERROR(comm.SendRecv(buf + give.lo * esize, (give.hi - give.lo) * esize, partner,
                                       theirs, (keep.hi - keep.lo) * esize, partner,
                                       kAdasumHalvingTag)
                             .AddContext(where));
    // Partial sums of every tensor over the kept half; slot 1 is always the left vector's norm.
    std::fill(sums_.begin(), sums_.end(), 0.0);
    for (size_t t = 0; t < layout.tensors(); ++t) {
      size_t first;
      const size_t n = layout.Piece(t, keep, &first);
      if (n == 0) continue;
      double part[3] = {0, 0, 0};
      kernels.dot_and_norms(buf + first * esize, theirs + (first - keep.lo) * esize, n, part);
      sums_[3 * t] = part[0];
      sums_[3 * t + (left ? 1 : 2)] = part[1];
      sums_[3 * t + (left ? 2 : 1)] = part[2];
    }
    // Whole-vector sums over the 2d ranks of this block (recursive doubling).
    for (int e = 1; e <= d; e <<= 1) {
      const int peer = rank ^ e;
      KOLO_RETURN_IF_ERROR(comm.SendRecv(sums_.data(), sums_.size() * sizeof(double), peer,
                                         peer_sums_.data(), peer_sums_.size() * sizeof(double),
                                         peer, kAdasumSumTag)
                               .AddContext(Where("dot products", level + 1, levels, peer)));
      for (size_t i = 0; i < sums_.size(); ++i) sums_[i] += peer_sums_[i];
    }
    for (size_t t = 0; t < layout.tensors(); ++t) {
      size_t first;
      const size_t n = layout.Piece(t, keep, &first);
      if (n == 0) continue;
      const double dot = sums_[3 * t];
      const double mine_sq = sums_[3 * t + (left ? 1 : 2)];
      const double theirs_sq = sums_[3 * t + (left ? 2 : 1)];
      // Horovod's expressions, so the coefficients round alike.
      const double ca = mine_sq >= kTinyNormSq ? 1.0 - dot / mine_sq * 0.5 : 1.0;
      const double cb = theirs_sq >= kTinyNormSq ? 1.0 - dot / theirs_sq * 0.5 : 1.0;
      kernels.combine(buf + first * esize, theirs + (first - keep.lo) * esize, n, ca, cb);
    }
    path[level] = w;
    w = keep;
  }
  for (int d = p >> 1; d >= 1; d >>= 1) {
    const Window parent = path[--level];
    const int partner = rank ^ d;
    // The half the partner kept at this level (the lower rank kept the first half).
    const Window sibling = (rank & d) == 0 ? Window{w.hi, parent.hi} : Window{parent.lo, w.lo};
    KOLO_RETURN_IF_ERROR(comm.SendRecv(buf + w.lo * esize, (w.hi - w.lo) * esize, partner,
                                       buf + sibling.lo * esize, (sibling.hi - sibling.lo) * esize,
                                       partner, kAdasumDoublingTag)
                             .AddContext(Where("doubling", levels - level, levels, partner)));
    w = parent;
  }
  return Status::OK();
}

}  // namespace kolo
