// Reference arithmetic and test data for tests/unit/reduce_test.cc, written in plain scalar code
// (int64, uint64, double, frexp/ldexp) and never calling collectives/reduce.h, so the tests
// compare the kernels against something independent. Elements travel as raw bits in a uint64.
#ifndef KOLO_TESTS_UNIT_REDUCE_REFERENCE_H_
#define KOLO_TESTS_UNIT_REDUCE_REFERENCE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/dtype.h"

namespace kolo::reduce_testing {

// ---- reference arithmetic ---------------------------------------------------------------------

// An IEEE binary format: float16 has 5 exponent and 10 mantissa bits, bfloat16 8 and 7.
struct Format {
  int ebits;
  int mbits;
};
constexpr Format kF16{5, 10};
constexpr Format kBF16{8, 7};

inline double RefDecode(uint16_t bits, Format f) {
  const int bias = (1 << (f.ebits - 1)) - 1;
  const int e = (bits >> f.mbits) & ((1 << f.ebits) - 1);
  const int m = bits & ((1 << f.mbits) - 1);
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  if (e == (1 << f.ebits) - 1) return m != 0 ? std::nan("") : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, 1 - bias - f.mbits);
  return sign * std::ldexp(m + (1 << f.mbits), e - bias - f.mbits);
}

// Nearest value, ties to the even significand; too large -> inf; NaN -> a NaN pattern.
inline uint16_t RefEncode(double x, Format f) {
  const int bias = (1 << (f.ebits - 1)) - 1;
  const int max_field = (1 << f.ebits) - 1;
  if (std::isnan(x)) return static_cast<uint16_t>(0x7fff);
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(x);
  if (std::isinf(a)) return static_cast<uint16_t>(sign | (max_field << f.mbits));
  int exp2;
  std::frexp(a, &exp2);                  // a in [2^(exp2-1), 2^exp2)
  int e = std::max(exp2 - 1, 1 - bias);  // subnormals share the smallest normal's spacing
  const double units = a / std::ldexp(1.0, e - f.mbits);  // exact: divides by a power of two
  double sig = std::floor(units);
  const double rest = units - sig;
  if (rest > 0.5 || (rest == 0.5 && std::fmod(sig, 2.0) != 0)) sig += 1;
  int64_t s = static_cast<int64_t>(sig);
  if (s == (int64_t{2} << f.mbits)) {  // rounded up into the next binade
    s >>= 1;
    ++e;
  }
  const int field = s < (int64_t{1} << f.mbits) ? 0 : e + bias;
  if (field >= max_field) return static_cast<uint16_t>(sign | (max_field << f.mbits));
  return static_cast<uint16_t>(sign | (field << f.mbits) | (s & ((1 << f.mbits) - 1)));
}

inline bool IsHalfNaN(uint16_t bits, Format f) {
  const int e = (bits >> f.mbits) & ((1 << f.ebits) - 1);
  return e == (1 << f.ebits) - 1 && (bits & ((1 << f.mbits) - 1)) != 0;
}

inline float FloatFromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t BitsOfFloat(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline double DoubleFromBits(uint64_t u) {
  double d;
  std::memcpy(&d, &u, 8);
  return d;
}
inline uint64_t BitsOfDouble(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
}

inline Format HalfFormat(DataType t) { return t == DataType::kFloat16 ? kF16 : kBF16; }

inline bool IsSigned(DataType t) {
  return t == DataType::kInt8 || t == DataType::kInt16 || t == DataType::kInt32 ||
         t == DataType::kInt64;
}

// Element values as the reference sees them. Elements are held as raw bits (uint64, low bytes).
inline int64_t AsInt(DataType t, uint64_t bits) {
  const int shift = 64 - 8 * static_cast<int>(DataTypeSize(t));
  if (IsSigned(t)) return static_cast<int64_t>(bits << shift) >> shift;  // sign-extend
  return static_cast<int64_t>(bits);
}

inline double AsDouble(DataType t, uint64_t bits) {
  switch (t) {
    case DataType::kFloat32:
      return FloatFromBits(static_cast<uint32_t>(bits));
    case DataType::kFloat64:
      return DoubleFromBits(bits);
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return RefDecode(static_cast<uint16_t>(bits), HalfFormat(t));
    default:
      return static_cast<double>(AsInt(t, bits));
  }
}

inline uint64_t Mask(DataType t) {
  return DataTypeSize(t) == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * DataTypeSize(t))) - 1;
}

// Bits of the float result `r` (already rounded to float32 where the dtype says so).
inline uint64_t FloatResultBits(DataType t, double r) {
  switch (t) {
    case DataType::kFloat32:
      return BitsOfFloat(static_cast<float>(r));
    case DataType::kFloat64:
      return BitsOfDouble(r);
    default:
      return RefEncode(static_cast<double>(static_cast<float>(r)), HalfFormat(t));
  }
}

inline bool IsNaNBits(DataType t, uint64_t bits) {
  switch (t) {
    case DataType::kFloat32:
      return std::isnan(FloatFromBits(static_cast<uint32_t>(bits)));
    case DataType::kFloat64:
      return std::isnan(DoubleFromBits(bits));
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return IsHalfNaN(static_cast<uint16_t>(bits), HalfFormat(t));
    default:
      return false;
  }
}

inline uint64_t RefReduce(DataType t, ReduceOp op, uint64_t a, uint64_t b) {
  if (t == DataType::kBool) {
    const bool x = a != 0, y = b != 0;
    return (op == ReduceOp::kSum || op == ReduceOp::kMax) ? (x || y) : (x && y);
  }
  if (IsFloatingPoint(t)) {
    // float32 +,* of two floats done in double and rounded once is exactly the float32 result.
    const double x = AsDouble(t, a), y = AsDouble(t, b);
    switch (op) {
      case ReduceOp::kSum:
        return FloatResultBits(t, x + y);
      case ReduceOp::kProduct:
        return FloatResultBits(t, x * y);
      case ReduceOp::kMin:
        return FloatResultBits(t, std::min(x, y));
      default:
        return FloatResultBits(t, std::max(x, y));
    }
  }
  const int64_t x = AsInt(t, a), y = AsInt(t, b);
  const uint64_t ux = static_cast<uint64_t>(x), uy = static_cast<uint64_t>(y);
  switch (op) {
    case ReduceOp::kSum:
      return (ux + uy) & Mask(t);
    case ReduceOp::kProduct:
      return (ux * uy) & Mask(t);
    case ReduceOp::kMin:
      return static_cast<uint64_t>(std::min(x, y)) & Mask(t);
    default:
      return static_cast<uint64_t>(std::max(x, y)) & Mask(t);
  }
}

// Integer result of "compute in double, truncate toward zero", saturating, NaN -> 0.
inline uint64_t RefTruncate(DataType t, double p) {
  const int bits = 8 * static_cast<int>(DataTypeSize(t));
  const double hi = std::ldexp(1.0, IsSigned(t) ? bits - 1 : bits);  // first value out of range
  const double lo = IsSigned(t) ? -hi : 0.0;
  if (std::isnan(p)) return 0;
  const double v = std::trunc(p);
  if (v >= hi) return (IsSigned(t) ? (uint64_t{1} << (bits - 1)) - 1 : Mask(t));
  if (v < lo) return IsSigned(t) ? (uint64_t{1} << (bits - 1)) : 0;
  return static_cast<uint64_t>(static_cast<int64_t>(v)) & Mask(t);
}

inline uint64_t RefScale(DataType t, uint64_t a, double factor) {
  if (factor == 1.0) return a;
  if (IsInteger(t)) return RefTruncate(t, static_cast<double>(AsInt(t, a)) * factor);
  if (t == DataType::kFloat64) return BitsOfDouble(AsDouble(t, a) * factor);
  // float32 and the halves multiply in float32: exact product in double, rounded once.
  return FloatResultBits(t, AsDouble(t, a) * static_cast<double>(static_cast<float>(factor)));
}

// ---- buffers and data ---------------------------------------------------------------------------

inline uint64_t Mix(uint64_t x) {  // SplitMix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct Buffer {
  DataType dtype;
  std::vector<unsigned char> bytes;

  Buffer(DataType t, size_t count) : dtype(t), bytes(count * DataTypeSize(t) + 1) {}
  size_t count() const { return (bytes.size() - 1) / DataTypeSize(dtype); }
  void* data() { return bytes.data(); }
  uint64_t Get(size_t i) const {
    uint64_t v = 0;
    std::memcpy(&v, bytes.data() + i * DataTypeSize(dtype), DataTypeSize(dtype));
    return v;
  }
  void Set(size_t i, uint64_t v) {
    std::memcpy(bytes.data() + i * DataTypeSize(dtype), &v, DataTypeSize(dtype));
  }
};

// Rank-unique data: every element is a hash of (rank, i). Floats are mostly moderate values
// with specials mixed in: random bit patterns, NaNs at different places per rank, and +0/-0
// pairs (so Min/Max argument order is observable).
inline Buffer MakeData(DataType t, size_t count, int rank) {
  Buffer buf(t, count);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t h = Mix(static_cast<uint64_t>(rank) << 40 ^ i ^ static_cast<uint64_t>(t) << 32);
    uint64_t v = h;
    if (t == DataType::kBool) {
      v = h & 1;
    } else if (t == DataType::kFloat32 || t == DataType::kFloat64) {
      const bool f32 = t == DataType::kFloat32;
      const double sign = (h & 1) ? -1.0 : 1.0;
      const double mant = 1.0 + static_cast<double>((h >> 8) & 0xffffff) / 16777216.0;
      const double x = sign * std::ldexp(mant, static_cast<int>((h >> 40) % 41) - 20);
      v = f32 ? BitsOfFloat(static_cast<float>(x)) : BitsOfDouble(x);
      if ((h >> 60) == 0) v = f32 ? (h >> 7) & 0xffffffff : h >> 3;  // any pattern
      if (i % 101 == static_cast<size_t>(17 + rank)) v = f32 ? 0x7fc01234 : 0x7ff8000000001234;
      if (i % 103 == 29) v = rank == 0 ? 0 : (f32 ? 0x80000000 : 0x8000000000000000);
    }
    buf.Set(i, v & Mask(t));
  }
  return buf;
}

}  // namespace kolo::reduce_testing

#endif  // KOLO_TESTS_UNIT_REDUCE_REFERENCE_H_
