// Shared machinery of collectives/reduce.cc and collectives/reduce_half.cc; not for other callers
// except their tests.
//
// Why the kernels look the way they do:
//  - GCC 12+ at -O2 (our RelWithDebInfo) vectorises with the "very-cheap" cost model, which
//    refuses any loop that would need a scalar epilogue or a run-time alias check. So every loop
//    walks blocks of kBlock elements (a constant trip count, a multiple of every vector width)
//    with __restrict pointers and finishes the short remainder with scalar code. Where reduce.h
//    lets pointers be equal, reduce.cc switches to a one-pointer loop (ReduceInto) or combines
//    each block into stack scratch before storing it (ReducePair), and reduce_half.cc goes
//    through stack scratch, so __restrict is never a lie.
//  - GCC (under its default -ftrapping-math) also refuses a loop in which a float operation is
//    needed on one side of a condition only; reduce_half.cc computes such values in a separate
//    pass.
//  - Each kernel is instantiated twice: for the baseline ISA and, on x86-64 with GCC/Clang,
//    under target("avx2,f16c"); UseAvx2() picks one per call. Both inline the same element code
//    and no FMA is enabled (nothing is contracted differently), so the two give identical bits.
#ifndef KOLO_COLLECTIVES_REDUCE_INTERNAL_H_
#define KOLO_COLLECTIVES_REDUCE_INTERNAL_H_

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"

// -DKOLO_REDUCE_X86=0 builds only the portable kernels (what non-x86 targets get).
#ifndef KOLO_REDUCE_X86
#if defined(__x86_64__) && defined(__GNUC__)
#define KOLO_REDUCE_X86 1
#else
#define KOLO_REDUCE_X86 0
#endif
#endif

#if KOLO_REDUCE_X86
#define KOLO_REDUCE_AVX2 __attribute__((target("avx2,f16c")))
#else
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
void ReduceHalfInto(uint16_t* inout, const uint16_t* in, size_t count, DataType dtype, ReduceOp op);
void ScaleHalf(uint16_t* dst, const uint16_t* src, size_t count, DataType dtype, float factor);

// Elements per block: a multiple of every vector width up to 64 bytes for every element type.
inline constexpr size_t kBlock = 64;

}  // namespace kolo::internal

#endif  // KOLO_COLLECTIVES_REDUCE_INTERNAL_H_
