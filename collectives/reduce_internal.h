// Shared machinery of collectives/reduce.cc and collectives/reduce_half.cc; not for other callers
// except their tests.
//
// Why the loops look the way they do:
//  - GCC 12+ at -O2 (our RelWithDebInfo) vectorises with the "very-cheap" cost model, which
//    refuses any loop that would need a scalar epilogue or a run-time alias check. So each loop
//    walks fixed blocks of kBlock elements (a constant trip count that is a multiple of every
//    vector width) and finishes the short remainder separately, and the two pointers are
//    __restrict. Calls where the pointers are equal (allowed by reduce.h) take a one-pointer
//    in-place loop instead, so __restrict is never a lie.
//  - Each kernel is a template instantiated twice: once for the baseline ISA and, on x86-64 with
//    GCC/Clang, once under target("avx2,f16c"). UseAvx2() picks one per call; the element
//    function is inlined into both, so the two produce bit-identical results (no FMA is enabled,
//    so nothing gets contracted differently).
#ifndef KOLO_COLLECTIVES_REDUCE_INTERNAL_H_
#define KOLO_COLLECTIVES_REDUCE_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "base/dtype.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define KOLO_REDUCE_X86 1
#define KOLO_REDUCE_AVX2 __attribute__((target("avx2,f16c")))
#else
#define KOLO_REDUCE_X86 0
#define KOLO_REDUCE_AVX2
#endif

#if defined(__GNUC__)
#define KOLO_REDUCE_INLINE inline __attribute__((always_inline))
#else
#define KOLO_REDUCE_INLINE inline
#endif

namespace kolo::internal {

// True when the AVX2 (+F16C) instantiations run: the CPU has both and no test switched them off.
bool UseAvx2();
// Test-only: false forces the baseline loops, so one machine tests both paths.
void SetSimdEnabledForTesting(bool enabled);

// float16/bfloat16 kernels, in reduce_half.cc. `dtype` is kFloat16 or kBFloat16 and `op` one of
// kSum, kMin, kMax, kProduct (the public entry points have checked); pointers may be equal.
void ReduceHalfInto(uint16_t* inout, const uint16_t* in, size_t count, DataType dtype,
                    ReduceOp op);
void ScaleHalf(uint16_t* dst, const uint16_t* src, size_t count, DataType dtype, float factor);

inline constexpr size_t kBlock = 64;

// dst[i] = f(src[i]).
template <typename D, typename S, typename F>
KOLO_REDUCE_INLINE void MapBlocked(D* __restrict dst, const S* __restrict src, size_t n, F f) {
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    D* __restrict d = dst + i;
    const S* __restrict s = src + i;
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

template <typename D, typename S, typename F>
void MapBaseline(D* dst, const S* src, size_t n, F f) {
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

#if KOLO_REDUCE_X86
template <typename D, typename S, typename F>
KOLO_REDUCE_AVX2 void MapAvx2(D* dst, const S* src, size_t n, F f) {
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
#endif

// dst[i] = f(src[i]); dst and src are equal (same type only) or do not overlap.
template <typename D, typename S, typename F>
void Map(D* dst, const S* src, size_t n, F f) {
  if constexpr (std::is_same_v<D, S>) {
    if (dst == src) {
#if KOLO_REDUCE_X86
      if (UseAvx2()) return MapInPlaceAvx2(dst, n, f);
#endif
      return MapInPlaceBaseline(dst, n, f);
    }
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

}  // namespace kolo::internal

#endif  // KOLO_COLLECTIVES_REDUCE_INTERNAL_H_
