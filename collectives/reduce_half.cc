// float16 (IEEE binary16) and bfloat16: scalar conversions, bulk widen/narrow, and the
// ReduceInto/ScaleCopy kernels for the two 16-bit float types.
//
// One definition of every conversion, bit-exact on every path, because in an all-reduce every
// rank must produce the same bits whatever its CPU:
//   - float16 <- float32 rounds to nearest even; magnitudes >= 65520 become inf; float16
//     subnormals are produced and consumed exactly.
//   - NaN handling copies x86 F16C (vcvtph2ps / vcvtps2ph): the sign and the top payload bits are
//     kept and the quiet bit is set. So the scalar code below and the F16C loops agree on every
//     one of the 2^32 inputs, NaNs included, and a scalar tail never differs from the vector body.
//   - bfloat16 is the top half of a float32: widening is a shift (NaNs unchanged), narrowing adds
//     0x7fff plus the lowest kept bit (round to nearest even; FLT_MAX rounds to inf) and quiets
//     NaNs by setting bit 6 rather than letting rounding carry a NaN into inf.
// (Reductions inherit one unavoidable freedom: when both operands of a Sum or Product are NaN,
// which payload survives depends on how the compiler ordered the commutative operation.)
// No step depends on MXCSR's FTZ/DAZ bits: the only float operations (the subnormal paths) have
// normal operands and normal results.
//
// Kernels: float16 with F16C uses explicit 8-lane intrinsics (compilers do not turn the bit code
// into vcvtph2ps); everything else runs the branch-free bit code below in blocks through float32
// scratch, which GCC vectorises for the baseline ISA and, for bfloat16, for AVX2. Reductions
// widen each pair to float32, combine in float32, and narrow back, as reduce.h specifies.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "collectives/reduce.h"
#include "collectives/reduce_internal.h"

#if KOLO_REDUCE_X86
#include <immintrin.h>
#endif

namespace kolo {
namespace {

KOLO_REDUCE_INLINE uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

KOLO_REDUCE_INLINE float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// float16 -> float32. Exponent and mantissa move 13 bits up and the exponent is rebiased. A
// subnormal m * 2^-24 is made exactly by one float subtraction, 2^-14 * (1 + m/1024) - 2^-14,
// which `subnormal` must hold: the block loops compute it for every lane in a separate pass,
// because GCC (under its default -ftrapping-math) will not vectorise a loop in which a float
// operation is only needed on one side of a condition.
KOLO_REDUCE_INLINE float HalfSubnormalPart(uint16_t h) {
  return BitsToFloat((static_cast<uint32_t>(h & 0x3ffu) << 13) + (113u << 23)) -
         BitsToFloat(113u << 23);
}

KOLO_REDUCE_INLINE float HalfBitsToFloat(uint16_t h, float subnormal) {
  const uint32_t magnitude = static_cast<uint32_t>(h & 0x7fffu) << 13;
  const uint32_t exponent = magnitude & 0x0f800000u;
  const uint32_t normal = magnitude + (112u << 23);
  const uint32_t quiet = (magnitude & 0x007fffffu) != 0 ? 0x00400000u : 0u;
  const uint32_t inf_nan = (magnitude + (224u << 23)) | quiet;
  uint32_t r = exponent == 0 ? FloatBits(subnormal) : normal;
  r = exponent == 0x0f800000u ? inf_nan : r;
  return BitsToFloat(r | (static_cast<uint32_t>(h & 0x8000u) << 16));
}

KOLO_REDUCE_INLINE float HalfBitsToFloat(uint16_t h) {
  return HalfBitsToFloat(h, HalfSubnormalPart(h));
}

// float32 -> float16. For a subnormal result (|f| < 2^-14) one float ulp of 0.5 + |f| is 2^-24,
// the float16 subnormal step, so the FPU's round-to-nearest-even does the rounding and the low
// bits of the sum are the result (0x400 being the smallest normal). Same two-pass rule as above.
KOLO_REDUCE_INLINE float HalfSubnormalRounded(float f) {
  return BitsToFloat(FloatBits(f) & 0x7fffffffu) + 0.5f;
}

KOLO_REDUCE_INLINE uint16_t FloatToHalfBits(float f, float subnormal_rounded) {
  const uint32_t all = FloatBits(f);
  const uint32_t sign = (all >> 16) & 0x8000u;
  const uint32_t u = all & 0x7fffffffu;
  // Normal result: rebias, then round the 13 dropped bits to nearest even by adding 0xfff plus
  // the lowest kept bit. A carry out of the mantissa is the right answer, up to and including
  // 65520 -> inf. (Wraps harmlessly for inputs another case handles.)
  const uint32_t normal = (u - (112u << 23) + 0xfffu + ((u >> 13) & 1u)) >> 13;
  const uint32_t subnormal = FloatBits(subnormal_rounded) - 0x3f000000u;
  const uint32_t nan = 0x7e00u | ((u >> 13) & 0x3ffu);
  uint32_t r = u < (113u << 23) ? subnormal : normal;
  r = u >= (143u << 23) ? 0x7c00u : r;  // |f| >= 2^16, inf included
  r = u > 0x7f800000u ? nan : r;
  return static_cast<uint16_t>(r | sign);
}

KOLO_REDUCE_INLINE uint16_t FloatToHalfBits(float f) {
  return FloatToHalfBits(f, HalfSubnormalRounded(f));
}

KOLO_REDUCE_INLINE float BFloat16BitsToFloat(uint16_t b) {
  return BitsToFloat(static_cast<uint32_t>(b) << 16);
}

KOLO_REDUCE_INLINE uint16_t FloatToBFloat16Bits(float f) {
  const uint32_t u = FloatBits(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

using internal::kBlock;

// A codec converts one element (tails, scalar API) or one block of kBlock elements.
struct Float16Codec {
  static float Decode(uint16_t h) { return HalfBitsToFloat(h); }
  static uint16_t Encode(float f) { return FloatToHalfBits(f); }
  static KOLO_REDUCE_INLINE void DecodeBlock(float* __restrict dst,
                                             const uint16_t* __restrict src) {
    float subnormal[kBlock];
    for (size_t j = 0; j < kBlock; ++j) subnormal[j] = HalfSubnormalPart(src[j]);
    for (size_t j = 0; j < kBlock; ++j) dst[j] = HalfBitsToFloat(src[j], subnormal[j]);
  }
  static KOLO_REDUCE_INLINE void EncodeBlock(uint16_t* __restrict dst,
                                             const float* __restrict src) {
    float rounded[kBlock];
    for (size_t j = 0; j < kBlock; ++j) rounded[j] = HalfSubnormalRounded(src[j]);
    for (size_t j = 0; j < kBlock; ++j) dst[j] = FloatToHalfBits(src[j], rounded[j]);
  }
};

struct BFloat16Codec {
  static float Decode(uint16_t b) { return BFloat16BitsToFloat(b); }
  static uint16_t Encode(float f) { return FloatToBFloat16Bits(f); }
  static KOLO_REDUCE_INLINE void DecodeBlock(float* __restrict dst,
                                             const uint16_t* __restrict src) {
    for (size_t j = 0; j < kBlock; ++j) dst[j] = BFloat16BitsToFloat(src[j]);
  }
  static KOLO_REDUCE_INLINE void EncodeBlock(uint16_t* __restrict dst,
                                             const float* __restrict src) {
    for (size_t j = 0; j < kBlock; ++j) dst[j] = FloatToBFloat16Bits(src[j]);
  }
};

// The float32 combine step; Min/Max keep std::min/std::max argument order.
template <ReduceOp kOp>
KOLO_REDUCE_INLINE float Combine(float a, float b) {
  if constexpr (kOp == ReduceOp::kSum) {
    return a + b;
  } else if constexpr (kOp == ReduceOp::kMin) {
    return b < a ? b : a;
  } else if constexpr (kOp == ReduceOp::kMax) {
    return a < b ? b : a;
  } else {
    static_assert(kOp == ReduceOp::kProduct);
    return a * b;
  }
}

// ---- portable kernels: blocks through float32 scratch on the stack ----------------------------
// Going through scratch makes dst == src (and inout == in) safe without a separate in-place loop.
// Instantiated for the baseline ISA (both types) and AVX2 (bfloat16; float16 uses F16C there).

template <typename Codec>
KOLO_REDUCE_INLINE void WidenBlocks(float* dst, const uint16_t* src, size_t n, float factor) {
  const bool scale = factor != 1.0f;  // so that x * 1 cannot quiet a bfloat16 signalling NaN
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    float* __restrict d = dst + i;
    Codec::DecodeBlock(d, src + i);
    if (scale) {
      for (size_t j = 0; j < kBlock; ++j) d[j] *= factor;
    }
  }
  for (; i < n; ++i) dst[i] = scale ? Codec::Decode(src[i]) * factor : Codec::Decode(src[i]);
}

template <typename Codec>
KOLO_REDUCE_INLINE void NarrowBlocks(uint16_t* dst, const float* src, size_t n, float factor) {
  float scaled[kBlock];
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    const float* __restrict s = src + i;
    for (size_t j = 0; j < kBlock; ++j) scaled[j] = s[j] * factor;
    Codec::EncodeBlock(dst + i, scaled);
  }
  for (; i < n; ++i) dst[i] = Codec::Encode(src[i] * factor);
}

template <typename Codec, ReduceOp kOp>
KOLO_REDUCE_INLINE void ReduceBlocks(uint16_t* inout, const uint16_t* in, size_t n) {
  float a[kBlock];
  float b[kBlock];
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    Codec::DecodeBlock(a, inout + i);
    Codec::DecodeBlock(b, in + i);
    for (size_t j = 0; j < kBlock; ++j) a[j] = Combine<kOp>(a[j], b[j]);
    Codec::EncodeBlock(inout + i, a);
  }
  for (; i < n; ++i) {
    inout[i] = Codec::Encode(Combine<kOp>(Codec::Decode(inout[i]), Codec::Decode(in[i])));
  }
}

template <typename Codec>
KOLO_REDUCE_INLINE void ScaleBlocks(uint16_t* dst, const uint16_t* src, size_t n, float factor) {
  float v[kBlock];
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    Codec::DecodeBlock(v, src + i);
    for (size_t j = 0; j < kBlock; ++j) v[j] *= factor;
    Codec::EncodeBlock(dst + i, v);
  }
  for (; i < n; ++i) dst[i] = Codec::Encode(Codec::Decode(src[i]) * factor);
}

template <typename Codec>
void WidenBaseline(float* dst, const uint16_t* src, size_t n, float factor) {
  WidenBlocks<Codec>(dst, src, n, factor);
}
template <typename Codec>
void NarrowBaseline(uint16_t* dst, const float* src, size_t n, float factor) {
  NarrowBlocks<Codec>(dst, src, n, factor);
}
template <typename Codec, ReduceOp kOp>
void ReduceBaseline(uint16_t* inout, const uint16_t* in, size_t n) {
  ReduceBlocks<Codec, kOp>(inout, in, n);
}
template <typename Codec>
void ScaleBaseline(uint16_t* dst, const uint16_t* src, size_t n, float factor) {
  ScaleBlocks<Codec>(dst, src, n, factor);
}

// ---- float16 with F16C ---------------------------------------------------------------------
// Each 8-lane step loads before it stores, so dst == src (ScaleCopy, ReduceInto) is safe.

#if KOLO_REDUCE_X86
KOLO_REDUCE_AVX2 inline __m256 LoadHalf8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

KOLO_REDUCE_AVX2 inline void StoreHalf8(uint16_t* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

template <bool kScale>
KOLO_REDUCE_AVX2 void WidenF16C(float* dst, const uint16_t* src, size_t n, float factor) {
  const __m256 f = _mm256_set1_ps(factor);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = LoadHalf8(src + i);
    if constexpr (kScale) v = _mm256_mul_ps(v, f);
    _mm256_storeu_ps(dst + i, v);
  }
  for (; i < n; ++i) dst[i] = kScale ? HalfBitsToFloat(src[i]) * factor : HalfBitsToFloat(src[i]);
}

template <bool kScale>
KOLO_REDUCE_AVX2 void NarrowF16C(uint16_t* dst, const float* src, size_t n, float factor) {
  const __m256 f = _mm256_set1_ps(factor);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(src + i);
    if constexpr (kScale) v = _mm256_mul_ps(v, f);
    StoreHalf8(dst + i, v);
  }
  for (; i < n; ++i) dst[i] = FloatToHalfBits(kScale ? src[i] * factor : src[i]);
}

template <ReduceOp kOp>
KOLO_REDUCE_AVX2 void ReduceF16C(uint16_t* inout, const uint16_t* in, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = LoadHalf8(inout + i);
    const __m256 b = LoadHalf8(in + i);
    __m256 r;
    // minps/maxps(x, y) return y unless x compares strictly less/greater: with x = b this is
    // exactly Combine<kOp>(a, b), NaN and signed-zero cases included.
    if constexpr (kOp == ReduceOp::kSum) {
      r = _mm256_add_ps(a, b);
    } else if constexpr (kOp == ReduceOp::kMin) {
      r = _mm256_min_ps(b, a);
    } else if constexpr (kOp == ReduceOp::kMax) {
      r = _mm256_max_ps(b, a);
    } else {
      r = _mm256_mul_ps(a, b);
    }
    StoreHalf8(inout + i, r);
  }
  for (; i < n; ++i) {
    inout[i] = FloatToHalfBits(Combine<kOp>(HalfBitsToFloat(inout[i]), HalfBitsToFloat(in[i])));
  }
}

KOLO_REDUCE_AVX2 void ScaleF16C(uint16_t* dst, const uint16_t* src, size_t n, float factor) {
  const __m256 f = _mm256_set1_ps(factor);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) StoreHalf8(dst + i, _mm256_mul_ps(LoadHalf8(src + i), f));
  for (; i < n; ++i) dst[i] = FloatToHalfBits(HalfBitsToFloat(src[i]) * factor);
}

// bfloat16 with AVX2: the portable blocks, compiled for AVX2.
KOLO_REDUCE_AVX2 void WidenBFloat16Avx2(float* dst, const uint16_t* src, size_t n, float factor) {
  WidenBlocks<BFloat16Codec>(dst, src, n, factor);
}
KOLO_REDUCE_AVX2 void NarrowBFloat16Avx2(uint16_t* dst, const float* src, size_t n, float factor) {
  NarrowBlocks<BFloat16Codec>(dst, src, n, factor);
}
template <ReduceOp kOp>
KOLO_REDUCE_AVX2 void ReduceBFloat16Avx2(uint16_t* inout, const uint16_t* in, size_t n) {
  ReduceBlocks<BFloat16Codec, kOp>(inout, in, n);
}
KOLO_REDUCE_AVX2 void ScaleBFloat16Avx2(uint16_t* dst, const uint16_t* src, size_t n,
                                        float factor) {
  ScaleBlocks<BFloat16Codec>(dst, src, n, factor);
}
#endif  // KOLO_REDUCE_X86

template <ReduceOp kOp>
void ReduceHalfOp(uint16_t* inout, const uint16_t* in, size_t n, DataType dtype) {
  const bool f16 = dtype == DataType::kFloat16;
#if KOLO_REDUCE_X86
  if (internal::UseAvx2()) {
    return f16 ? ReduceF16C<kOp>(inout, in, n) : ReduceBFloat16Avx2<kOp>(inout, in, n);
  }
#endif
  return f16 ? ReduceBaseline<Float16Codec, kOp>(inout, in, n)
             : ReduceBaseline<BFloat16Codec, kOp>(inout, in, n);
}

// Widen/Narrow return void, so a wrong dtype (a caller's bug, not bad input) aborts loudly rather
// than silently converting with the wrong format.
void CheckHalfOrDie(const char* function, DataType dtype) {
  if (IsHalf(dtype)) return;
  std::fprintf(stderr, "kolo: %s: dtype %d (%.*s) is not float16 or bfloat16\n", function,
               static_cast<int>(dtype), static_cast<int>(DataTypeName(dtype).size()),
               DataTypeName(dtype).data());
  std::abort();
}

}  // namespace

float HalfToFloat(uint16_t h) { return HalfBitsToFloat(h); }
uint16_t FloatToHalf(float f) { return FloatToHalfBits(f); }
float BFloat16ToFloat(uint16_t b) { return BFloat16BitsToFloat(b); }
uint16_t FloatToBFloat16(float f) { return FloatToBFloat16Bits(f); }

void WidenToFloat32(float* dst, const void* src, size_t count, DataType half_dtype, float factor) {
  CheckHalfOrDie("WidenToFloat32", half_dtype);
  const uint16_t* s = static_cast<const uint16_t*>(src);
  const bool f16 = half_dtype == DataType::kFloat16;
#if KOLO_REDUCE_X86
  if (internal::UseAvx2()) {
    if (!f16) return WidenBFloat16Avx2(dst, s, count, factor);
    return factor == 1.0f ? WidenF16C<false>(dst, s, count, factor)
                          : WidenF16C<true>(dst, s, count, factor);
  }
#endif
  return f16 ? WidenBaseline<Float16Codec>(dst, s, count, factor)
             : WidenBaseline<BFloat16Codec>(dst, s, count, factor);
}

void NarrowFromFloat32(void* dst, const float* src, size_t count, DataType half_dtype,
                       float factor) {
  CheckHalfOrDie("NarrowFromFloat32", half_dtype);
  uint16_t* d = static_cast<uint16_t*>(dst);
  const bool f16 = half_dtype == DataType::kFloat16;
#if KOLO_REDUCE_X86
  if (internal::UseAvx2()) {
    if (!f16) return NarrowBFloat16Avx2(d, src, count, factor);
    return factor == 1.0f ? NarrowF16C<false>(d, src, count, factor)
                          : NarrowF16C<true>(d, src, count, factor);
  }
#endif
  return f16 ? NarrowBaseline<Float16Codec>(d, src, count, factor)
             : NarrowBaseline<BFloat16Codec>(d, src, count, factor);
}

namespace internal {

void ReduceHalfInto(uint16_t* inout, const uint16_t* in, size_t count, DataType dtype,
                    ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ReduceHalfOp<ReduceOp::kSum>(inout, in, count, dtype);
    case ReduceOp::kMin:
      return ReduceHalfOp<ReduceOp::kMin>(inout, in, count, dtype);
    case ReduceOp::kMax:
      return ReduceHalfOp<ReduceOp::kMax>(inout, in, count, dtype);
    case ReduceOp::kProduct:
      return ReduceHalfOp<ReduceOp::kProduct>(inout, in, count, dtype);
    default:
      return;  // ReduceInto has refused it
  }
}

void ScaleHalf(uint16_t* dst, const uint16_t* src, size_t count, DataType dtype, float factor) {
  const bool f16 = dtype == DataType::kFloat16;
#if KOLO_REDUCE_X86
  if (internal::UseAvx2()) {
    return f16 ? ScaleF16C(dst, src, count, factor) : ScaleBFloat16Avx2(dst, src, count, factor);
  }
#endif
  return f16 ? ScaleBaseline<Float16Codec>(dst, src, count, factor)
             : ScaleBaseline<BFloat16Codec>(dst, src, count, factor);
}

}  // namespace internal
}  // namespace kolo
