// Reduction and conversion kernels for every dtype x op, on host memory. These are the inner
// loops of every all-reduce (the library's user-defined MPI ops, the fusion buffer's pack and
// unpack, the loopback transport), so they are written for throughput (vectorisable loops,
// run-time CPU dispatch where it pays) and never allocate.
//
// Semantics (documented once here, relied on everywhere):
//  - Sum/Min/Max/Product per dtype's own arithmetic; integers wrap like C's unsigned arithmetic.
//  - bool (one byte, 0 or 1): Sum and Max are logical OR, Min and Product are logical AND.
//  - float16 (IEEE binary16) and bfloat16: each element is widened to float32, combined, and
//    rounded back to the 16-bit type with round-to-nearest-even. Callers that want one rounding
//    for a whole all-reduce widen to float32 first (WidenToFloat32) and narrow at the end.
//  - NaN: Min/Max follow std::min/std::max argument order (a NaN in `inout` is kept).
//  - Average is not a kernel op: it is Sum, then a division by the number of ranks (LowerReduce
//    says how, for every caller).
//  - Buffers: `inout` and `in` are either the same pointer or do not overlap at all; dst/src of
//    the conversions do not overlap. bool bytes other than 0 are read as true.
//  - Integer ScaleCopy saturates to the dtype's range (NaN -> 0); int64 values above 2^53
//    lose precision through double. DivideCopy refuses divisors <= 0 (kInvalidArgument).
#ifndef KOLO_COLLECTIVES_REDUCE_H_
#define KOLO_COLLECTIVES_REDUCE_H_

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"
#include "base/status.h"

namespace kolo {

// inout[i] = op(inout[i], in[i]) for i < count. op must be kSum, kMin, kMax or kProduct;
// returns kInvalidArgument otherwise. inout and in may not partially overlap.
Status ReduceInto(void* inout, const void* in, size_t count, DataType dtype, ReduceOp op);

// dst[i] = op(a[i], b[i]) for i < count, and copy[i] the same where copy is not null: what a
// memcpy(dst, a), a ReduceInto(dst, b) and a memcpy(copy, dst) would leave, in one pass over a
// and b (memory traffic, not arithmetic, bounds these loops). a takes inout's place in
// ReduceInto's semantics (Min/Max keep a NaN of a). dst and copy may each equal a or b; no other
// two of the buffers overlap. The same ops and refusals as ReduceInto.
Status ReducePair(void* dst, const void* a, const void* b, size_t count, DataType dtype,
                  ReduceOp op, void* copy = nullptr);

// ReducePair with its values multiplied by `factor` in the same pass: dst[i] (and copy[i]) =
// op(a[i], b[i]) * factor, the product rounded in the dtype's precision with factor rounded to
// it first: the bits of ReducePair followed by ScaleCopy(dst, dst, count, dtype, factor). It
// saves an all-reduce's last pass over its result the pass of a separate scale (Average's
// 1/size). dst and copy may each equal a or b, as for ReducePair. float32 and float64 only;
// any other dtype takes factor 1 alone (kInvalidArgument otherwise).
Status ReducePairScaled(void* dst, const void* a, const void* b, size_t count, DataType dtype,
                        ReduceOp op, double factor, void* copy = nullptr);

// dst[i] = src[i] * factor for i < count (dst may equal src). Floating dtypes compute in their
// own precision (float16/bfloat16 in float32, rounded once); integers compute in double and
// truncate toward zero; bool accepts only factor == 1 (kInvalidArgument otherwise). A factor of
// exactly 1 degenerates to a copy (or nothing when dst == src).
Status ScaleCopy(void* dst, const void* src, size_t count, DataType dtype, double factor);

// How a reduction runs: what the algorithm reduces with, and what happens to its result. Every
// all-reduce and reduce-scatter path (host and device) lowers its op here, so Average means the
// same everywhere: a Sum over `size` ranks, then for floating dtypes one scale by
// postscale / size, for integers an exact DivideCopy by `size` (truncating) before the
// postscale. Other ops pass through with their postscale.
struct LoweredReduce {
  ReduceOp wire_op = ReduceOp::kSum;  // what the algorithm reduces with (Sum for Average)
  double float_postscale = 1.0;       // floating dtypes: the one scale of the result
  int64_t integer_divisor = 1;        // integer dtypes: DivideCopy by this (1: none) ...
  double integer_postscale = 1.0;     // ... then ScaleCopy by this
};
LoweredReduce LowerReduce(ReduceOp op, double postscale, int size);

// Integer Average: dst[i] = src[i] / divisor, truncating toward zero (C's `/`). For floating
// dtypes this is ScaleCopy by 1/divisor. Refused for bool.
Status DivideCopy(void* dst, const void* src, size_t count, DataType dtype, int64_t divisor);

// float16/bfloat16 <-> float32, with a scale factor applied in float32 (factor 1 = plain
// conversion). Narrowing rounds to nearest even; overflow gives +-inf, NaN stays NaN.
void WidenToFloat32(float* dst, const void* src, size_t count, DataType half_dtype, float factor);
void NarrowFromFloat32(void* dst, const float* src, size_t count, DataType half_dtype,
                       float factor);

// Scalar conversions (used by tests as the reference and by the kernels' tails).
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float BFloat16ToFloat(uint16_t b);
uint16_t FloatToBFloat16(float f);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_REDUCE_H_
