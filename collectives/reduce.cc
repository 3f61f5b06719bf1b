// Entry points of reduce.h and the kernels for the native element types (integers, bool,
// float32, float64). float16/bfloat16 are in reduce_half.cc; why the loops are blocked and
// compiled twice is explained in reduce_internal.h.
//
// Integer arithmetic is done in an unsigned type at least as wide as `unsigned`: wrapping is then
// defined (signed overflow would be UB) and small types do not overflow through promotion to int
// (uint16 * uint16 does). bool is stored as one byte and read as a byte, never as C++ bool, so a
// stray 2 from a framework is not UB; results are always 0 or 1.
#include "collectives/reduce.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "collectives/reduce_internal.h"

#if KOLO_REDUCE_X86
#include <cpuid.h>
#endif

namespace kolo {
namespace internal {
namespace {

std::atomic<bool> g_simd_enabled{true};

bool CpuHasAvx2F16c() {
#if KOLO_REDUCE_X86
  // Explicit init: this may first run from another library's static constructor.
  __builtin_cpu_init();
  // __builtin_cpu_supports("avx2") also checks that the OS saves YMM state, which F16C needs
  // too; F16C itself is read from CPUID because older Clang has no "f16c" feature string.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  return __builtin_cpu_supports("avx2") && f16c;
#else
  return false;
#endif
}

}  // namespace

bool UseAvx2() {
  static const bool cpu_has_avx2 = CpuHasAvx2F16c();
  return cpu_has_avx2 && g_simd_enabled.load(std::memory_order_relaxed);
}

void SetSimdEnabledForTesting(bool enabled) {
  g_simd_enabled.store(enabled, std::memory_order_relaxed);
}

}  // namespace internal

namespace {

using internal::kBlock;
using internal::UseAvx2;

// ---- loops (see reduce_internal.h for why they are blocked and duplicated) -------------------

// dst[i] = f(src[i]).
template <typename T, typename F>
KOLO_REDUCE_INLINE void MapBlocked(T* __restrict dst, const T* __restrict src, size_t n, F f) {
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    T* __restrict d = dst + i;
    const T* __restrict s = src + i;
    for (size_t j = 0; j < kBlock; ++j) d[j] = f(s[j]);
  }
  for (; i < n; ++i) dst[i] = f(src[i]);
}

// data[i] = f(data[i]).
template <typename T, typename F>
KOLO_REDUCE_INLINE void MapInPlace(T* data, size_t n, F f) {
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    T* d = data + i;
    for (size_t j = 0; j < kBlock; ++j) d[j] = f(d[j]);
  }
  for (; i < n; ++i) data[i] = f(data[i]);
}

// inout[i] = f(inout[i], in[i]).
template <typename T, typename F>
KOLO_REDUCE_INLINE void ZipBlocked(T* __restrict inout, const T* __restrict in, size_t n, F f) {
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    T* __restrict a = inout + i;
    const T* __restrict b = in + i;
    for (size_t j = 0; j < kBlock; ++j) a[j] = f(a[j], b[j]);
  }
  for (; i < n; ++i) inout[i] = f(inout[i], in[i]);
}

// scratch[j] = f(a[j], b[j]) for one block. Its own function so that the scope of the __restrict
// pointers ends before the block is stored: the stores may write what a or b pointed to.
template <typename T, typename F>
KOLO_REDUCE_INLINE void CombineBlock(T* __restrict scratch, const T* __restrict a,
                                     const T* __restrict b, F f) {
  for (size_t j = 0; j < kBlock; ++j) scratch[j] = f(a[j], b[j]);
}

// dst[i] = f(a[i], b[i]), and copy[i] too unless copy is null. Each block is combined into stack
// scratch before it is stored, so dst and copy may equal a or b (reduce.h: ReducePair): no
// __restrict pointer is live while dst or copy is written.
template <typename T, typename F>
KOLO_REDUCE_INLINE void PairBlocked(T* dst, T* copy, const T* a, const T* b, size_t n, F f) {
  T scratch[kBlock];
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    CombineBlock(scratch, a + i, b + i, f);
    std::memcpy(dst + i, scratch, sizeof(scratch));
    if (copy) std::memcpy(copy + i, scratch, sizeof(scratch));
  }
  for (; i < n; ++i) {
    const T v = f(a[i], b[i]);
    dst[i] = v;
    if (copy) copy[i] = v;
  }
}

template <typename T, typename F>
void MapBaseline(T* dst, const T* src, size_t n, F f) {
  MapBlocked(dst, src, n, f);
}
template <typename T, typename F>
void MapInPlaceBaseline(T* data, size_t n, F f) {
  MapInPlace(data, n, f);
}
template <typename T, typename F>
void ZipBaseline(T* inout, const T* in, size_t n, F f) {
  ZipBlocked(inout, in, n, f);
}
template <typename T, typename F>
void PairBaseline(T* dst, T* copy, const T* a, const T* b, size_t n, F f) {
  PairBlocked(dst, copy, a, b, n, f);
}

#if KOLO_REDUCE_X86
template <typename T, typename F>
KOLO_REDUCE_AVX2 void MapAvx2(T* dst, const T* src, size_t n, F f) {
  MapBlocked(dst, src, n, f);
}
template <typename T, typename F>
KOLO_REDUCE_AVX2 void MapInPlaceAvx2(T* data, size_t n, F f) {
  MapInPlace(data, n, f);
}
template <typename T, typename F>
KOLO_REDUCE_AVX2 void ZipAvx2(T* inout, const T* in, size_t n, F f) {
  ZipBlocked(inout, in, n, f);
}
template <typename T, typename F>
KOLO_REDUCE_AVX2 void PairAvx2(T* dst, T* copy, const T* a, const T* b, size_t n, F f) {
  PairBlocked(dst, copy, a, b, n, f);
}
#endif

// dst[i] = f(src[i]); dst and src are equal or do not overlap.
template <typename T, typename F>
void Map(T* dst, const T* src, size_t n, F f) {
  if (dst == src) {
#if KOLO_REDUCE_X86
    if (UseAvx2()) return MapInPlaceAvx2(dst, n, f);
#endif
    return MapInPlaceBaseline(dst, n, f);
  }
#if KOLO_REDUCE_X86
  if (UseAvx2()) return MapAvx2(dst, src, n, f);
#endif
  MapBaseline(dst, src, n, f);
}

// inout[i] = f(inout[i], in[i]); inout and in are equal or do not overlap. Equal pointers are
// legal in reduce.h but no caller passes them, so that case gets only the baseline loop.
template <typename T, typename F>
void Zip(T* inout, const T* in, size_t n, F f) {
  if (inout == in) return MapInPlaceBaseline(inout, n, [f](T a) { return f(a, a); });
#if KOLO_REDUCE_X86
  if (UseAvx2()) return ZipAvx2(inout, in, n, f);
#endif
  ZipBaseline(inout, in, n, f);
}

// dst[i] = copy[i] = f(a[i], b[i]) (copy may be null); see PairBlocked for what may alias.
template <typename T, typename F>
void Pair(T* dst, T* copy, const T* a, const T* b, size_t n, F f) {
#if KOLO_REDUCE_X86
  if (UseAvx2()) return PairAvx2(dst, copy, a, b, n, f);
#endif
  PairBaseline(dst, copy, a, b, n, f);
}

// ---- element functions ------------------------------------------------------------------------

template <typename T>
using WrapType =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <typename T>
T Add(T x, T y) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<WrapType<T>>(x) + static_cast<WrapType<T>>(y));
  } else {
    return x + y;
  }
}

template <typename T>
T Multiply(T x, T y) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<WrapType<T>>(x) * static_cast<WrapType<T>>(y));
  } else {
    return x * y;
  }
}

// double -> integer, truncating toward zero. Out-of-range values saturate and NaN gives 0:
// reduce.h does not promise clamping, but a plain cast would be UB there. The clamp is done in
// double so the loop stays branch-free; for 64-bit types the largest double below 2^63 (2^64)
// is not the type's max, so values at or above the limit are patched afterwards.
template <typename T>
T TruncateToInt(double v) {
  using Limits = std::numeric_limits<T>;
  constexpr double kLimit = static_cast<double>(Limits::max() / 2 + 1) * 2.0;  // 2^digits
  constexpr double kLo = static_cast<double>(Limits::min());                   // exact
  constexpr double kHi = sizeof(T) < 8       ? static_cast<double>(Limits::max())
                         : Limits::is_signed ? kLimit - 1024.0
                                             : kLimit - 2048.0;
  double c = v < kLo ? kLo : v;
  c = c > kHi ? kHi : c;
  c = c == c ? c : 0.0;
  T r = static_cast<T>(c);
  if constexpr (sizeof(T) == 8) r = v >= kLimit ? Limits::max() : r;
  return r;
}

// C's `/` (truncation toward zero) with divisor > 0, so neither x / 0 nor INT64_MIN / -1 occurs.
template <typename T>
T DivideTrunc(T x, int64_t divisor) {
  if constexpr (std::is_signed_v<T>) {
    return static_cast<T>(static_cast<int64_t>(x) / divisor);
  } else {
    return static_cast<T>(static_cast<uint64_t>(x) / static_cast<uint64_t>(divisor));
  }
}

// Calls visit(f) with the element function f(x, y) of `op` on T: sum, min, max or product (the
// kernel ops; the callers have refused any other). ReduceInto and ReducePair share these, so
// the in-place and the two-operand kernels cannot disagree on a NaN or a wrap-around.
template <typename T, typename Visit>
void WithElementOp(ReduceOp op, Visit visit) {
  switch (op) {
    case ReduceOp::kSum:
      return visit([](T x, T y) { return Add(x, y); });
    case ReduceOp::kMin:  // std::min(x, y): a NaN in x is kept
      return visit([](T x, T y) { return y < x ? y : x; });
    case ReduceOp::kMax:  // std::max(x, y)
      return visit([](T x, T y) { return x < y ? y : x; });
    case ReduceOp::kProduct:
      return visit([](T x, T y) { return Multiply(x, y); });
    default:
      return;
  }
}

// bool's: sum and max are OR, min and product AND, on bytes (any nonzero byte is true).
template <typename Visit>
void WithBoolOp(ReduceOp op, Visit visit) {
  if (op == ReduceOp::kSum || op == ReduceOp::kMax) {
    visit([](uint8_t x, uint8_t y) -> uint8_t { return (x != 0) | (y != 0); });
  } else {
    visit([](uint8_t x, uint8_t y) -> uint8_t { return (x != 0) & (y != 0); });
  }
}

// Calls f(T{}) for dtype's C++ type T when it is a native one (the integers, float32,
// float64) and returns true; returns false for bool, float16 and bfloat16, which each entry
// point treats on its own.
template <typename F>
bool VisitNative(DataType dtype, F f) {
  switch (dtype) {
    case DataType::kUInt8:
      f(uint8_t{});
      return true;
    case DataType::kInt8:
      f(int8_t{});
      return true;
    case DataType::kUInt16:
      f(uint16_t{});
      return true;
    case DataType::kInt16:
      f(int16_t{});
      return true;
    case DataType::kInt32:
      f(int32_t{});
      return true;
    case DataType::kInt64:
      f(int64_t{});
      return true;
    case DataType::kFloat32:
      f(float{});
      return true;
    case DataType::kFloat64:
      f(double{});
      return true;
    case DataType::kBool:
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return false;
  }
  return false;
}

// float16/bfloat16: reduce_half.cc's kernels on stack scratch, a block at a time (a copy of a,
// ReduceHalfInto with b, then the stores), so any of dst and copy may equal a or b.
void ReducePairHalf(uint16_t* dst, uint16_t* copy, const uint16_t* a, const uint16_t* b, size_t n,
                    DataType dtype, ReduceOp op) {
  constexpr size_t kScratch = 16 * kBlock;
  uint16_t scratch[kScratch];
  for (size_t i = 0; i < n; i += kScratch) {
    const size_t m = std::min(kScratch, n - i);
    std::memcpy(scratch, a + i, m * sizeof(uint16_t));
    internal::ReduceHalfInto(scratch, b + i, m, dtype, op);
    std::memcpy(dst + i, scratch, m * sizeof(uint16_t));
    if (copy) std::memcpy(copy + i, scratch, m * sizeof(uint16_t));
  }
}

template <typename T>
void ScaleNative(void* dst, const void* src, size_t n, double factor) {
  T* d = static_cast<T*>(dst);
  const T* s = static_cast<const T*>(src);
  if constexpr (std::is_floating_point_v<T>) {
    const T f = static_cast<T>(factor);
    Map(d, s, n, [f](T x) { return x * f; });
  } else {
    Map(d, s, n, [factor](T x) { return TruncateToInt<T>(static_cast<double>(x) * factor); });
  }
}

template <typename T>
void DivideNative(void* dst, const void* src, size_t n, int64_t divisor) {
  Map(static_cast<T*>(dst), static_cast<const T*>(src), n,
      [divisor](T x) { return DivideTrunc(x, divisor); });
}

bool IsKernelOp(ReduceOp op) {
  return op == ReduceOp::kSum || op == ReduceOp::kMin || op == ReduceOp::kMax ||
         op == ReduceOp::kProduct;
}

std::string DtypeLabel(DataType dtype) {
  if (IsValidDataType(static_cast<int>(dtype))) return std::string(DataTypeName(dtype));
  return "invalid dtype " + std::to_string(static_cast<int>(dtype));
}

Status CheckDtype(const char* function, DataType dtype) {
  if (IsValidDataType(static_cast<int>(dtype))) return Status::OK();
  return InvalidArgumentError(std::string(function) + ": " + DtypeLabel(dtype));
}

void CopyUnlessSame(void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes != 0) std::memcpy(dst, src, bytes);
}

Status CheckKernelOp(const char* function, DataType dtype, ReduceOp op) {
  KOLO_RETURN_IF_ERROR(CheckDtype(function, dtype));
  if (IsKernelOp(op)) return Status::OK();
  std::string name = IsValidReduceOp(static_cast<int>(op))
                         ? std::string(ReduceOpName(op))
                         : "invalid op " + std::to_string(static_cast<int>(op));
  std::string message = std::string(function) + ": op " + name + " on dtype " + DtypeLabel(dtype) +
                        " is not an element-wise kernel op (kernels do sum, min, max, product";
  if (op == ReduceOp::kAverage) message += "; average is sum then DivideCopy";
  return InvalidArgumentError(message + ")");
}

}  // namespace

Status ReduceInto(void* inout, const void* in, size_t count, DataType dtype, ReduceOp op) {
  KOLO_RETURN_IF_ERROR(CheckKernelOp("ReduceInto", dtype, op));
  if (count == 0) return Status::OK();
  const bool native = VisitNative(dtype, [&](auto tag) {
    using T = decltype(tag);
    WithElementOp<T>(
        op, [&](auto f) { Zip(static_cast<T*>(inout), static_cast<const T*>(in), count, f); });
  });
  if (native) return Status::OK();
  if (dtype == DataType::kBool) {
    WithBoolOp(op, [&](auto f) {
      Zip(static_cast<uint8_t*>(inout), static_cast<const uint8_t*>(in), count, f);
    });
  } else {
    internal::ReduceHalfInto(static_cast<uint16_t*>(inout), static_cast<const uint16_t*>(in), count,
                             dtype, op);
  }
  return Status::OK();
}

Status ReducePair(void* dst, const void* a, const void* b, size_t count, DataType dtype,
                  ReduceOp op, void* copy) {
  KOLO_RETURN_IF_ERROR(CheckKernelOp("ReducePair", dtype, op));
  if (count == 0) return Status::OK();
  const bool native = VisitNative(dtype, [&](auto tag) {
    using T = decltype(tag);
    WithElementOp<T>(op, [&](auto f) {
      Pair(static_cast<T*>(dst), static_cast<T*>(copy), static_cast<const T*>(a),
           static_cast<const T*>(b), count, f);
    });
  });
  if (native) return Status::OK();
  if (dtype == DataType::kBool) {
    WithBoolOp(op, [&](auto f) {
      Pair(static_cast<uint8_t*>(dst), static_cast<uint8_t*>(copy), static_cast<const uint8_t*>(a),
           static_cast<const uint8_t*>(b), count, f);
    });
  } else {
    ReducePairHalf(static_cast<uint16_t*>(dst), static_cast<uint16_t*>(copy),
                   static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b), count, dtype,
                   op);
  }
  return Status::OK();
}

Status ReducePairScaled(void* dst, const void* a, const void* b, size_t count, DataType dtype,
                        ReduceOp op, double factor, void* copy) {
  if (factor == 1.0) return ReducePair(dst, a, b, count, dtype, op, copy);
  KOLO_RETURN_IF_ERROR(CheckKernelOp("ReducePairScaled", dtype, op));
  if (dtype != DataType::kFloat32 && dtype != DataType::kFloat64) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%g", factor);
    return InvalidArgumentError("ReducePairScaled: dtype " + DtypeLabel(dtype) +
                                " takes only factor 1 (float32 and float64 fold a scale), got " +
                                buf);
  }
  if (count == 0) return Status::OK();
  VisitNative(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      const T scale = static_cast<T>(factor);  // as ScaleCopy rounds it
      WithElementOp<T>(op, [&](auto f) {
        Pair(static_cast<T*>(dst), static_cast<T*>(copy), static_cast<const T*>(a),
             static_cast<const T*>(b), count, [f, scale](T x, T y) { return f(x, y) * scale; });
      });
    }
  });
  return Status::OK();
}

Status ScaleCopy(void* dst, const void* src, size_t count, DataType dtype, double factor) {
  KOLO_RETURN_IF_ERROR(CheckDtype("ScaleCopy", dtype));
  if (factor == 1.0) {
    CopyUnlessSame(dst, src, count * DataTypeSize(dtype));
    return Status::OK();
  }
  if (dtype == DataType::kBool) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%g", factor);
    return InvalidArgumentError(std::string("ScaleCopy: dtype bool accepts only factor 1, got ") +
                                buf);
  }
  if (count == 0) return Status::OK();
  const bool native =
      VisitNative(dtype, [&](auto tag) { ScaleNative<decltype(tag)>(dst, src, count, factor); });
  if (!native) {  // float16 or bfloat16: bool was refused above
    internal::ScaleHalf(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), count,
                        dtype, static_cast<float>(factor));
  }
  return Status::OK();
}

LoweredReduce LowerReduce(ReduceOp op, double postscale, int size) {
  LoweredReduce l;
  l.wire_op = op;
  l.float_postscale = postscale;
  l.integer_postscale = postscale;
  if (op == ReduceOp::kAverage) {
    l.wire_op = ReduceOp::kSum;
    l.float_postscale = postscale / size;
    l.integer_divisor = size;
  }
  return l;
}

Status DivideCopy(void* dst, const void* src, size_t count, DataType dtype, int64_t divisor) {
  KOLO_RETURN_IF_ERROR(CheckDtype("DivideCopy", dtype));
  if (dtype == DataType::kBool) {
    return InvalidArgumentError("DivideCopy: dtype bool cannot be divided (no average of bool)");
  }
  // Callers divide by a group size. Requiring it positive rules out x / 0 and INT64_MIN / -1,
  // and an unsigned value divided by a negative number, which has no sensible result.
  if (divisor <= 0) {
    return InvalidArgumentError("DivideCopy: dtype " + DtypeLabel(dtype) +
                                ": divisor must be positive, got " + std::to_string(divisor));
  }
  if (IsFloatingPoint(dtype)) {
    return ScaleCopy(dst, src, count, dtype, 1.0 / static_cast<double>(divisor));
  }
  if (divisor == 1) {
    CopyUnlessSame(dst, src, count * DataTypeSize(dtype));
    return Status::OK();
  }
  if (count == 0) return Status::OK();
  VisitNative(dtype, [&](auto tag) {  // the integers: floating and bool were handled above
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) DivideNative<T>(dst, src, count, divisor);
  });
  return Status::OK();
}

}  // namespace kolo
