// The references every MPI test checks against: what an all-reduce (or its scaled and averaged
// forms) must produce, computed in float64 from every rank's known inputs, with the tolerance
// each dtype's rounding allows, and the comparisons that report the first bad element.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "test_util.h"

namespace kolo_test {

namespace {

// Wraps `value` modulo 2^bits of the dtype and sign- or zero-extends it back.
int64_t WrapToDtype(kolo_dtype_t dtype, uint64_t value) {
  switch (dtype) {
    case KOLO_UINT8: return static_cast<uint8_t>(value);
    case KOLO_INT8: return static_cast<int8_t>(static_cast<uint8_t>(value));
    case KOLO_UINT16: return static_cast<uint16_t>(value);
    case KOLO_INT16: return static_cast<int16_t>(static_cast<uint16_t>(value));
    case KOLO_INT32: return static_cast<int32_t>(static_cast<uint32_t>(value));
    case KOLO_INT64: return static_cast<int64_t>(value);
    case KOLO_BOOL: return value != 0;
    default: return static_cast<int64_t>(value);
  }
}

bool IsPowerOfTwo(double x) {
  if (!(x > 0.0) || std::isinf(x)) return false;
  int e = 0;
  return std::frexp(x, &e) == 0.5;
}

// Stored mantissa bits of a float dtype.
int MantBits(kolo_dtype_t dtype) {
  switch (dtype) {
    case KOLO_FLOAT16: return 10;
    case KOLO_BFLOAT16: return 7;
    case KOLO_FLOAT32: return 23;
    default: return 52;
  }
}

int ExpBits(kolo_dtype_t dtype) {
  switch (dtype) {
    case KOLO_FLOAT16: return 5;
    case KOLO_BFLOAT16: return 8;
    case KOLO_FLOAT32: return 8;
    default: return 11;
  }
}

// One unit in the last place of the dtype at magnitude |x|.
double Ulp(kolo_dtype_t dtype, double x) {
  const int mant = MantBits(dtype);
  const int bias = (1 << (ExpBits(dtype) - 1)) - 1;
  const double a = std::fabs(x);
  const double min_normal = std::ldexp(1.0, 1 - bias);
  if (a < min_normal) return std::ldexp(1.0, 1 - bias - mant);
  int e = 0;
  std::frexp(a, &e);
  return std::ldexp(1.0, e - 1 - mant);
}

// Rounds `x` to the dtype in which kolo computes (float32 for the 16-bit types).
double RoundToCompute(kolo_dtype_t dtype, double x) {
  if (dtype == KOLO_FLOAT64) return x;
  return static_cast<double>(static_cast<float>(x));
}

double ComputeEps(kolo_dtype_t dtype) {
  return dtype == KOLO_FLOAT64 ? std::ldexp(1.0, -52) : std::ldexp(1.0, -23);
}

int64_t ScaleInt(kolo_dtype_t dtype, int64_t x, double factor) {
  if (factor == 1.0) return x;
  const double scaled = std::trunc(static_cast<double>(x) * factor);
  return WrapToDtype(dtype, static_cast<uint64_t>(static_cast<int64_t>(scaled)));
}

}  // namespace

Reference AllreduceReference(const std::vector<TypedBuffer>& inputs, kolo_reduce_op_t op,
                             double prescale, double postscale) {
  Reference ref;
  if (inputs.empty()) return ref;
  const kolo_dtype_t dtype = inputs[0].dtype;
  const int64_t count = inputs[0].count;
  const int n = static_cast<int>(inputs.size());
  ref.expected = TypedBuffer(dtype, count);
  void* out = ref.expected.data();

  if (dtype == KOLO_BOOL) {
    for (int64_t i = 0; i < count; ++i) {
      bool any = false, all = true;
      for (const TypedBuffer& in : inputs) {
        const bool b = LoadInt(dtype, in.data(), i) != 0;
        any = any || b;
        all = all && b;
      }
      const bool v = (op == KOLO_OP_SUM || op == KOLO_OP_MAX) ? any : all;
      StoreInt(dtype, out, i, v ? 1 : 0);
    }
    return ref;
  }

  if (IsInteger(dtype)) {
    for (int64_t i = 0; i < count; ++i) {
      uint64_t acc = (op == KOLO_OP_PRODUCT) ? 1u : 0u;
      int64_t lo = 0, hi = 0;
      for (int r = 0; r < n; ++r) {
        const int64_t x = ScaleInt(dtype, LoadInt(dtype, inputs[r].data(), i), prescale);
        if (r == 0) lo = hi = x;
        lo = std::min(lo, x);
        hi = std::max(hi, x);
        if (op == KOLO_OP_PRODUCT) {
          acc *= static_cast<uint64_t>(x);  // wraps modulo 2^64, so modulo 2^bits too
        } else {
          acc += static_cast<uint64_t>(x);
        }
      }
      int64_t v;
      switch (op) {
        case KOLO_OP_MIN: v = lo; break;
        case KOLO_OP_MAX: v = hi; break;
        case KOLO_OP_AVERAGE: v = WrapToDtype(dtype, acc) / n; break;  // C '/': toward zero
        default: v = WrapToDtype(dtype, acc); break;
      }
      StoreInt(dtype, out, i, ScaleInt(dtype, v, postscale));
    }
    return ref;
  }

  // Floating point.
  const bool exact = IsPowerOfTwo(prescale) && IsPowerOfTwo(postscale) &&
                     (op != KOLO_OP_AVERAGE || IsPowerOfTwo(static_cast<double>(n)));
  if (!exact) ref.tolerance.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    double sum = 0.0, abs_sum = 0.0, prod = 1.0, lo = 0.0, hi = 0.0;
    for (int r = 0; r < n; ++r) {
      double y = LoadFloat(dtype, inputs[r].data(), i);
      if (prescale != 1.0) y = RoundToCompute(dtype, y * prescale);
      if (r == 0) lo = hi = y;
      lo = std::min(lo, y);
      hi = std::max(hi, y);
      sum += y;
      abs_sum += std::fabs(y);
      prod *= y;
    }
    double v, magnitude;
    switch (op) {
      case KOLO_OP_MIN: v = lo; magnitude = std::fabs(lo); break;
      case KOLO_OP_MAX: v = hi; magnitude = std::fabs(hi); break;
      case KOLO_OP_PRODUCT: v = prod; magnitude = std::fabs(prod) * n; break;
      case KOLO_OP_AVERAGE: v = sum / n; magnitude = abs_sum / n; break;
      default: v = sum; magnitude = abs_sum; break;
    }
    v *= postscale;
    magnitude *= std::fabs(postscale);
    StoreFloat(dtype, out, i, v);
    if (!exact) {
      // One unit in the last place of the storage type (a second rounding of the float32
      // result) plus a few of the compute type over the terms (prescale, sum, division, scale).
      ref.tolerance[static_cast<size_t>(i)] =
          Ulp(dtype, v) + 8.0 * ComputeEps(dtype) * (magnitude + std::fabs(v));
    }
  }
  return ref;
}

// ---- matching -----------------------------------------------------------------------------------

::testing::AssertionResult MatchesReference(const char* actual_expr, const char* reference_expr,
                                            const void* actual, const Reference& reference) {
  const TypedBuffer& want = reference.expected;
  const kolo_dtype_t dtype = want.dtype;
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < want.count; ++i) {
    bool ok;
    if (IsFloat(dtype)) {
      const double a = LoadFloat(dtype, actual, i);
      const double e = LoadFloat(dtype, want.data(), i);
      if (reference.tolerance.empty()) {
        ok = (a == e);
      } else {
        ok = std::fabs(a - e) <= reference.tolerance[static_cast<size_t>(i)];
      }
    } else {
      ok = LoadInt(dtype, actual, i) == LoadInt(dtype, want.data(), i);
    }
    if (!ok) {
      if (first < 0) first = i;
      ++wrong;
    }
  }
  if (wrong == 0) return ::testing::AssertionSuccess();
  std::ostringstream msg;
  msg << "rank " << WorldRank() << ": " << actual_expr << " does not match " << reference_expr
      << " (" << DtypeName(dtype) << ", " << want.count << " elements): first bad index " << first
      << ": expected " << FormatElement(dtype, want.data(), first) << ", actual "
      << FormatElement(dtype, actual, first);
  if (!reference.tolerance.empty()) {
    msg << " (tolerance " << reference.tolerance[static_cast<size_t>(first)] << ")";
  }
  msg << "; " << wrong << " of " << want.count << " wrong";
  return ::testing::AssertionFailure() << msg.str();
}

::testing::AssertionResult BytesEqual(const void* actual, const TypedBuffer& expected) {
  const unsigned char* a = static_cast<const unsigned char*>(actual);
  const size_t elem = std::max<size_t>(DtypeBytes(expected.dtype), 1);
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < expected.count; ++i) {
    if (std::memcmp(a + i * elem, expected.bytes.data() + i * elem, elem) != 0) {
      if (first < 0) first = i;
      ++wrong;
    }
  }
  if (wrong == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "rank " << WorldRank() << ": " << DtypeName(expected.dtype) << " buffer of "
         << expected.count << " elements differs: first bad index " << first << ": expected "
         << FormatElement(expected.dtype, expected.data(), first) << ", actual "
         << FormatElement(expected.dtype, actual, first) << "; " << wrong << " of "
         << expected.count << " wrong";
}

::testing::AssertionResult BuffersEqual(const char* actual_expr, const char* expected_expr,
                                        const TypedBuffer& actual, const TypedBuffer& expected) {
  if (actual.dtype != expected.dtype || actual.count != expected.count) {
    return ::testing::AssertionFailure()
           << actual_expr << " is " << DtypeName(actual.dtype) << "[" << actual.count << "], "
           << expected_expr << " is " << DtypeName(expected.dtype) << "[" << expected.count << "]";
  }
  ::testing::AssertionResult r = BytesEqual(actual.data(), expected);
  if (r) return r;
  return ::testing::AssertionFailure() << actual_expr << " != " << expected_expr << ": "
                                       << r.message();
}

}  // namespace kolo_test
