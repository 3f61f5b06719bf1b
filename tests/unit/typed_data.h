// Test data of any dtype from doubles, written without kolo's kernels so references stay
// independent. Only values exactly representable in the dtype are used (small integers), so
// encoding needs no rounding; decoding is exact.
#ifndef KOLO_TESTS_UNIT_TYPED_DATA_H_
#define KOLO_TESTS_UNIT_TYPED_DATA_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/dtype.h"

namespace kolo::testing {

// float16 / bfloat16 bits of an exactly representable normal value (or zero).
inline uint16_t ExactHalfBits(double v, bool bf16) {
  if (v == 0) return std::signbit(v) ? 0x8000 : 0;
  const uint16_t sign = v < 0 ? 0x8000 : 0;
  int e;
  double m = std::frexp(std::fabs(v), &e);  // v = m * 2^e, m in [0.5, 1)
  const int mant_bits = bf16 ? 7 : 10;
  const int bias = bf16 ? 127 : 15;
  const int exp_field = e - 1 + bias;
  const uint32_t frac = static_cast<uint32_t>(std::ldexp(m * 2 - 1, mant_bits));
  return static_cast<uint16_t>(sign | (exp_field << mant_bits) | frac);
}

inline double HalfBitsToDouble(uint16_t bits, bool bf16) {
  const int mant_bits = bf16 ? 7 : 10;
  const int bias = bf16 ? 127 : 15;
  const int exp_mask = bf16 ? 0xff : 0x1f;
  const double sign = (bits & 0x8000) ? -1 : 1;
  const int ex = (bits >> mant_bits) & exp_mask;
  const uint32_t frac = bits & ((1u << mant_bits) - 1);
  if (ex == 0) return sign * std::ldexp(frac, 1 - bias - mant_bits);
  if (ex == exp_mask) return frac ? NAN : sign * INFINITY;
  return sign * std::ldexp((1u << mant_bits) + frac, ex - bias - mant_bits);
}

inline void Store(DataType t, void* base, size_t i, double v) {
  switch (t) {
    case DataType::kUInt8: static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(int64_t(v)); break;
    case DataType::kInt8: static_cast<int8_t*>(base)[i] = static_cast<int8_t>(int64_t(v)); break;
    case DataType::kUInt16: static_cast<uint16_t*>(base)[i] = static_cast<uint16_t>(int64_t(v)); break;
    case DataType::kInt16: static_cast<int16_t*>(base)[i] = static_cast<int16_t>(int64_t(v)); break;
    case DataType::kInt32: static_cast<int32_t*>(base)[i] = static_cast<int32_t>(int64_t(v)); break;
    case DataType::kInt64: static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v); break;
    case DataType::kFloat32: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case DataType::kFloat64: static_cast<double*>(base)[i] = v; break;
    case DataType::kBool: static_cast<uint8_t*>(base)[i] = v != 0; break;
    case DataType::kFloat16: static_cast<uint16_t*>(base)[i] = ExactHalfBits(v, false); break;
    case DataType::kBFloat16: static_cast<uint16_t*>(base)[i] = ExactHalfBits(v, true); break;
  }
}

inline double Load(DataType t, const void* base, size_t i) {
  switch (t) {
    case DataType::kUInt8: return static_cast<const uint8_t*>(base)[i];
    case DataType::kInt8: return static_cast<const int8_t*>(base)[i];
    case DataType::kUInt16: return static_cast<const uint16_t*>(base)[i];
    case DataType::kInt16: return static_cast<const int16_t*>(base)[i];
    case DataType::kInt32: return static_cast<const int32_t*>(base)[i];
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case DataType::kFloat32: return static_cast<const float*>(base)[i];
    case DataType::kFloat64: return static_cast<const double*>(base)[i];
    case DataType::kBool: return static_cast<const uint8_t*>(base)[i];
    case DataType::kFloat16: return HalfBitsToDouble(static_cast<const uint16_t*>(base)[i], false);
    case DataType::kBFloat16: return HalfBitsToDouble(static_cast<const uint16_t*>(base)[i], true);
  }
  return 0;
}

// Rank-unique small values (period 11 in i, shifted by rank, so a misplaced element shows),
// chosen so reductions over up to 8 ranks stay exact in every dtype: |sum| <= 40, and Product
// uses values in {1, 2}.
inline double Value(DataType t, ReduceOp op, int rank, size_t i) {
  const int64_t k = static_cast<int64_t>((i * 7 + static_cast<size_t>(rank) * 3) % 11);
  if (t == DataType::kBool) return (i + rank) % 3 == 0;
  if (op == ReduceOp::kProduct) return (k % 2) + 1;  // 1 or 2: products stay small and exact
  const bool is_unsigned =
      t == DataType::kUInt8 || t == DataType::kUInt16;
  return is_unsigned ? static_cast<double>(k) : static_cast<double>(k - 5);
}

inline std::vector<char> Buffer(DataType t, size_t count) {
  return std::vector<char>(count * DataTypeSize(t) + 1);
}

// Reference of an all-reduce element, computed from every rank's known inputs in double.
inline double Reference(DataType t, ReduceOp op, int ranks, size_t i, double prescale = 1,
                        double postscale = 1) {
  double acc = 0;
  for (int r = 0; r < ranks; ++r) {
    double v = Value(t, op, r, i);
    if (t != DataType::kBool) v *= prescale;
    if (IsInteger(t)) v = std::trunc(v);
    if (r == 0) {
      acc = v;
      continue;
    }
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage: acc = t == DataType::kBool ? (acc || v) : acc + v; break;
      case ReduceOp::kMin: acc = t == DataType::kBool ? (acc && v) : std::min(acc, v); break;
      case ReduceOp::kMax: acc = t == DataType::kBool ? (acc || v) : std::max(acc, v); break;
      case ReduceOp::kProduct: acc = t == DataType::kBool ? (acc && v) : acc * v; break;
      default: break;
    }
  }
  if (op == ReduceOp::kAverage) acc = IsInteger(t) ? std::trunc(acc / ranks) : acc / ranks;
  if (t != DataType::kBool) acc *= postscale;
  if (IsInteger(t)) acc = std::trunc(acc);
  return acc;
}

inline double Tolerance(DataType t, double expected) {
  switch (t) {
    case DataType::kFloat16: return std::fabs(expected) * 1e-3 + 1e-3;
    case DataType::kBFloat16: return std::fabs(expected) * 8e-3 + 8e-3;
    case DataType::kFloat32: return std::fabs(expected) * 1e-6;
    case DataType::kFloat64: return std::fabs(expected) * 1e-14;
    default: return 0;
  }
}

}  // namespace kolo::testing

#endif  // KOLO_TESTS_UNIT_TYPED_DATA_H_
