// Tests of collectives/reduce.h against references written here in plain scalar code (int64,
// uint64, double, frexp/ldexp), never by calling the functions under test. Every parameterised
// test runs twice, with the AVX2/F16C kernels and with the baseline loops, so both paths are
// checked on one machine; counts 0, 1, 5, 1023, 4097 cover empty, tail-only, one block plus
// tail, and many blocks. Data is full-range and different for every element and "rank" (random
// bit patterns, so float16/bfloat16 inputs include subnormals, infinities and NaNs), so a
// misplaced or mis-rounded element shows.
#include "collectives/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "collectives/reduce_internal.h"
#include "tests/unit/reduce_reference.h"

namespace kolo::reduce_testing {
namespace {

// Compares element bits; a NaN expectation accepts any NaN. Reports the first bad index and the
// number of bad elements.
template <typename Expected>
void ExpectElements(const Buffer& actual, Expected expected, const std::string& what) {
  size_t wrong = 0, first = 0;
  uint64_t first_expected = 0;
  for (size_t i = 0; i < actual.count(); ++i) {
    const uint64_t want = expected(i);
    const uint64_t got = actual.Get(i);
    const bool ok = IsNaNBits(actual.dtype, want) ? IsNaNBits(actual.dtype, got) : got == want;
    if (!ok && wrong++ == 0) {
      first = i;
      first_expected = want;
    }
  }
  EXPECT_EQ(wrong, 0u) << what << ": first bad index " << first << " expected 0x" << std::hex
                       << first_expected << " actual 0x" << actual.Get(first) << std::dec << " ("
                       << wrong << " of " << actual.count() << " wrong)";
}

const std::vector<DataType>& AllDtypes() {
  static const std::vector<DataType> all = {
      DataType::kUInt8,   DataType::kInt8,  DataType::kUInt16,  DataType::kInt16,
      DataType::kInt32,   DataType::kInt64, DataType::kFloat16, DataType::kFloat32,
      DataType::kFloat64, DataType::kBool,  DataType::kBFloat16};
  return all;
}

std::vector<DataType> NumericDtypes() {
  std::vector<DataType> out;
  for (DataType t : AllDtypes()) {
    if (t != DataType::kBool) out.push_back(t);
  }
  return out;
}

const std::vector<size_t> kCounts = {0, 1, 5, 1023, 4097};

// Runs a test body with the SIMD kernels on or off, restoring the default afterwards.
class SimdScope {
 public:
  explicit SimdScope(bool simd) { internal::SetSimdEnabledForTesting(simd); }
  ~SimdScope() { internal::SetSimdEnabledForTesting(true); }
};

// ---- ReduceInto: every dtype x op x count x path ----------------------------------------------

using ReduceParam = std::tuple<DataType, ReduceOp, size_t, bool>;

// A ReduceInto or ReducePair case's parameters, unpacked, with the kernels' SIMD path set for
// the test's lifetime. (Members rather than structured bindings: C++17 lambdas cannot capture
// those.)
class KernelOpTest : public ::testing::TestWithParam<ReduceParam> {
 protected:
  KernelOpTest()
      : dtype_(std::get<0>(GetParam())),
        op_(std::get<1>(GetParam())),
        count_(std::get<2>(GetParam())),
        scope_(std::get<3>(GetParam())) {}

  const DataType dtype_;
  const ReduceOp op_;
  const size_t count_;

 private:
  SimdScope scope_;
};

std::string ReduceParamName(const ::testing::TestParamInfo<ReduceParam>& info) {
  const auto [dtype, op, count, simd] = info.param;
  return std::string(DataTypeName(dtype)) + "_" + std::string(ReduceOpName(op)) + "_" +
         std::to_string(count) + (simd ? "_simd" : "_baseline");
}

// Every dtype x kernel op x count x path.
auto KernelOpCases() {
  return ::testing::Combine(
      ::testing::ValuesIn(AllDtypes()),
      ::testing::Values(ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct),
      ::testing::ValuesIn(kCounts), ::testing::Bool());
}

class ReduceIntoTest : public KernelOpTest {};

TEST_P(ReduceIntoTest, MatchesReference) {
  const Buffer a = MakeData(dtype_, count_, 0);
  const Buffer b = MakeData(dtype_, count_, 1);
  Buffer out = a;
  ASSERT_TRUE(ReduceInto(out.data(), b.bytes.data(), count_, dtype_, op_).ok());
  ExpectElements(
      out, [&](size_t i) { return RefReduce(dtype_, op_, a.Get(i), b.Get(i)); }, "ReduceInto");
  EXPECT_EQ(out.bytes.back(), a.bytes.back()) << "wrote past the end";

  // reduce.h allows inout == in: each element meets itself.
  Buffer self = a;
  ASSERT_TRUE(ReduceInto(self.data(), self.data(), count_, dtype_, op_).ok());
  ExpectElements(
      self, [&](size_t i) { return RefReduce(dtype_, op_, a.Get(i), a.Get(i)); },
      "ReduceInto(x, x)");
}

INSTANTIATE_TEST_SUITE_P(AllDtypesOps, ReduceIntoTest, KernelOpCases(), ReduceParamName);

// ---- ReducePair: every dtype x op x count x path, with every aliasing reduce.h allows --------

class ReducePairTest : public KernelOpTest {};

TEST_P(ReducePairTest, MatchesReferenceWhateverAliases) {
  const Buffer a = MakeData(dtype_, count_, 0);
  const Buffer b = MakeData(dtype_, count_, 1);
  const Buffer untouched = MakeData(dtype_, count_, 2);
  auto expected = [&](size_t i) { return RefReduce(dtype_, op_, a.Get(i), b.Get(i)); };

  // Separate buffers, with and without the copy.
  Buffer dst = untouched, copy = untouched;
  ASSERT_TRUE(ReducePair(dst.data(), a.bytes.data(), b.bytes.data(), count_, dtype_, op_).ok());
  ExpectElements(dst, expected, "ReducePair(dst, a, b)");
  ASSERT_TRUE(
      ReducePair(dst.data(), a.bytes.data(), b.bytes.data(), count_, dtype_, op_, copy.data())
          .ok());
  ExpectElements(dst, expected, "ReducePair(dst, a, b, copy): dst");
  ExpectElements(copy, expected, "ReducePair(dst, a, b, copy): copy");
  EXPECT_EQ(dst.bytes.back(), untouched.bytes.back()) << "wrote past the end of dst";
  EXPECT_EQ(copy.bytes.back(), untouched.bytes.back()) << "wrote past the end of copy";

  // Every aliasing reduce.h allows: dst or copy (or both) the very buffer of a or of b. Each
  // case starts from fresh copies; the byte past the end of every buffer must stay as it was.
  struct Case {
    const char* what;
    int dst, copy;  // 0: a, 1: b, 2: a buffer of its own; copy -1: none
  };
  const Case cases[] = {{"dst = a", 0, -1},          {"dst = b", 1, -1},
                        {"dst = a, copy own", 0, 2}, {"dst = b, copy own", 1, 2},
                        {"dst own, copy = a", 2, 0}, {"dst own, copy = b", 2, 1},
                        {"dst = a, copy = b", 0, 1}, {"dst = b, copy = a", 1, 0}};
  for (const Case& k : cases) {
    Buffer buffers[3] = {a, b, untouched};
    ASSERT_TRUE(ReducePair(buffers[k.dst].data(), buffers[0].data(), buffers[1].data(), count_,
                           dtype_, op_, k.copy < 0 ? nullptr : buffers[k.copy].data())
                    .ok())
        << k.what;
    ExpectElements(buffers[k.dst], expected, std::string("ReducePair, ") + k.what + ": dst");
    if (k.copy >= 0) {
      ExpectElements(buffers[k.copy], expected, std::string("ReducePair, ") + k.what + ": copy");
    }
    EXPECT_EQ(buffers[0].bytes.back(), a.bytes.back()) << k.what << ": wrote past a's end";
    EXPECT_EQ(buffers[1].bytes.back(), b.bytes.back()) << k.what << ": wrote past b's end";
    EXPECT_EQ(buffers[2].bytes.back(), untouched.bytes.back()) << k.what << ": past the end";
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypesOps, ReducePairTest, KernelOpCases(), ReduceParamName);

// ---- ReducePairScaled: the bits of ReducePair then ScaleCopy, in one pass -------------------

class ReducePairScaledTest : public KernelOpTest {};

TEST_P(ReducePairScaledTest, MatchesReducePairThenScaleCopy) {
  const Buffer a = MakeData(dtype_, count_, 0);
  const Buffer b = MakeData(dtype_, count_, 1);
  const Buffer untouched = MakeData(dtype_, count_, 2);
  for (double factor : {1.0, 0.5, 1.0 / 3.0, -2.5}) {
    const std::string what = "ReducePairScaled by " + std::to_string(factor);
    auto expected = [&](size_t i) {
      return RefScale(dtype_, RefReduce(dtype_, op_, a.Get(i), b.Get(i)), factor);
    };
    Buffer dst = untouched, copy = untouched;
    const Status s = ReducePairScaled(dst.data(), a.bytes.data(), b.bytes.data(), count_, dtype_,
                                      op_, factor, copy.data());
    ASSERT_TRUE(s.ok()) << what << ": " << s.ToString();
    ExpectElements(dst, expected, what + ": dst");
    ExpectElements(copy, expected, what + ": copy");
    EXPECT_EQ(dst.bytes.back(), untouched.bytes.back()) << what << ": wrote past dst's end";
    EXPECT_EQ(copy.bytes.back(), untouched.bytes.back()) << what << ": wrote past copy's end";
    // The owner's last pass of shm: dst is its first operand, no copy.
    Buffer inout = a;
    ASSERT_TRUE(
        ReducePairScaled(inout.data(), inout.data(), b.bytes.data(), count_, dtype_, op_, factor)
            .ok())
        << what;
    ExpectElements(inout, expected, what + ": dst = a");
  }
}

INSTANTIATE_TEST_SUITE_P(FloatDtypesOps, ReducePairScaledTest,
                         ::testing::Combine(::testing::Values(DataType::kFloat32,
                                                              DataType::kFloat64),
                                            ::testing::Values(ReduceOp::kSum, ReduceOp::kMin,
                                                              ReduceOp::kMax, ReduceOp::kProduct),
                                            ::testing::ValuesIn(kCounts), ::testing::Bool()),
                         ReduceParamName);

// Every other dtype takes factor 1 (ReducePair's result) and refuses any other, naming itself,
// before writing anything.
TEST(ReducePairScaledRefusal, OtherDtypesTakeOnlyFactorOne) {
  const size_t count = 37;
  for (DataType dtype : AllDtypes()) {
    if (dtype == DataType::kFloat32 || dtype == DataType::kFloat64) continue;
    const std::string name(DataTypeName(dtype));
    const Buffer a = MakeData(dtype, count, 0);
    const Buffer b = MakeData(dtype, count, 1);
    const Buffer untouched = MakeData(dtype, count, 2);
    Buffer dst = untouched;
    const Status s = ReducePairScaled(dst.data(), a.bytes.data(), b.bytes.data(), count, dtype,
                                      ReduceOp::kSum, 0.5);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << name;
    EXPECT_NE(s.message().find(name), std::string::npos) << s.message();
    EXPECT_EQ(dst.bytes, untouched.bytes) << name << ": refused, yet wrote";
    ASSERT_TRUE(ReducePairScaled(dst.data(), a.bytes.data(), b.bytes.data(), count, dtype,
                                 ReduceOp::kMax, 1.0)
                    .ok())
        << name;
    ExpectElements(
        dst, [&](size_t i) { return RefReduce(dtype, ReduceOp::kMax, a.Get(i), b.Get(i)); },
        name + " factor 1");
  }
}

// ---- ScaleCopy / DivideCopy: every numeric dtype x count x path --------------------------------

using CopyParam = std::tuple<DataType, size_t, bool>;

class ScaleDivideTest : public ::testing::TestWithParam<CopyParam> {};

TEST_P(ScaleDivideTest, ScaleCopyMatchesReference) {
  const DataType dtype = std::get<0>(GetParam());
  const size_t count = std::get<1>(GetParam());
  SimdScope scope(std::get<2>(GetParam()));
  const Buffer src = MakeData(dtype, count, 2);
  for (double factor : {1.0, 0.5, -0.75, 1.0 / 3.0, 2.5, 1e-3}) {
    const std::string what = "ScaleCopy by " + std::to_string(factor);
    Buffer dst(dtype, count);
    ASSERT_TRUE(ScaleCopy(dst.data(), src.bytes.data(), count, dtype, factor).ok());
    ExpectElements(
        dst, [&](size_t i) { return RefScale(dtype, src.Get(i), factor); }, what);
    Buffer in_place = src;
    ASSERT_TRUE(ScaleCopy(in_place.data(), in_place.data(), count, dtype, factor).ok());
    ExpectElements(
        in_place, [&](size_t i) { return RefScale(dtype, src.Get(i), factor); },
        what + " in place");
  }
}

TEST_P(ScaleDivideTest, DivideCopyMatchesReference) {
  const DataType dtype = std::get<0>(GetParam());
  const size_t count = std::get<1>(GetParam());
  SimdScope scope(std::get<2>(GetParam()));
  const Buffer src = MakeData(dtype, count, 3);
  for (int64_t divisor : {1, 2, 3, 7, 1000}) {
    auto expected = [&](size_t i) -> uint64_t {
      const uint64_t x = src.Get(i);
      if (!IsInteger(dtype)) return RefScale(dtype, x, 1.0 / static_cast<double>(divisor));
      if (!IsSigned(dtype)) return x / static_cast<uint64_t>(divisor);
      return static_cast<uint64_t>(AsInt(dtype, x) / divisor) & Mask(dtype);
    };
    const std::string what = "DivideCopy by " + std::to_string(divisor);
    Buffer dst(dtype, count);
    ASSERT_TRUE(DivideCopy(dst.data(), src.bytes.data(), count, dtype, divisor).ok());
    ExpectElements(dst, expected, what);
    Buffer in_place = src;
    ASSERT_TRUE(DivideCopy(in_place.data(), in_place.data(), count, dtype, divisor).ok());
    ExpectElements(in_place, expected, what + " in place");
  }
}

std::string CopyParamName(const ::testing::TestParamInfo<CopyParam>& info) {
  const auto [dtype, count, simd] = info.param;
  return std::string(DataTypeName(dtype)) + "_" + std::to_string(count) +
         (simd ? "_simd" : "_baseline");
}

INSTANTIATE_TEST_SUITE_P(NumericDtypes, ScaleDivideTest,
                         ::testing::Combine(::testing::ValuesIn(NumericDtypes()),
                                            ::testing::ValuesIn(kCounts), ::testing::Bool()),
                         CopyParamName);

// ---- float16 / bfloat16 conversions ------------------------------------------------------------

// Counts mismatches over a sweep and reports the first, instead of thousands of EXPECTs.
class Mismatches {
 public:
  explicit Mismatches(std::string what) : what_(std::move(what)) {}
  ~Mismatches() { EXPECT_EQ(count_, 0u) << what_ << ": " << count_ << " wrong, first: " << first_; }
  void Check(bool ok, const std::string& detail) {
    if (!ok && count_++ == 0) first_ = detail;
  }

 private:
  std::string what_;
  size_t count_ = 0;
  std::string first_;
};

std::string Hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

class HalfConversionTest : public ::testing::TestWithParam<bool> {
 protected:
  HalfConversionTest() : scope_(GetParam()) {}

 private:
  SimdScope scope_;
};

// Every float16 pattern: widening is exact, narrowing the result gives the pattern back, and
// a NaN stays a NaN with its sign and payload and the quiet bit set (what F16C does).
TEST_P(HalfConversionTest, Float16AllPatternsRoundTrip) {
  std::vector<uint16_t> all(65536);
  for (size_t h = 0; h < all.size(); ++h) all[h] = static_cast<uint16_t>(h);
  std::vector<float> wide(all.size());
  std::vector<uint16_t> back(all.size());
  WidenToFloat32(wide.data(), all.data(), all.size(), DataType::kFloat16, 1.0f);
  NarrowFromFloat32(back.data(), wide.data(), wide.size(), DataType::kFloat16, 1.0f);
  Mismatches scalar("HalfToFloat/FloatToHalf"), bulk("WidenToFloat32/NarrowFromFloat32");
  for (uint32_t h = 0; h < 65536; ++h) {
    const double ref = RefDecode(static_cast<uint16_t>(h), kF16);
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    const bool nan = std::isnan(ref);
    const uint16_t want_back = static_cast<uint16_t>(nan ? (h | 0x200) : h);
    const bool widened_ok = nan ? std::isnan(f) && std::signbit(f) == ((h & 0x8000) != 0)
                                : f == ref && std::signbit(f) == std::signbit(ref);
    scalar.Check(widened_ok && FloatToHalf(f) == want_back, Hex(h));
    bulk.Check(BitsOfFloat(wide[h]) == BitsOfFloat(f) && back[h] == want_back, Hex(h));
  }
}

TEST_P(HalfConversionTest, BFloat16AllPatternsRoundTrip) {
  std::vector<uint16_t> all(65536);
  for (size_t h = 0; h < all.size(); ++h) all[h] = static_cast<uint16_t>(h);
  std::vector<float> wide(all.size());
  std::vector<uint16_t> back(all.size());
  WidenToFloat32(wide.data(), all.data(), all.size(), DataType::kBFloat16, 1.0f);
  NarrowFromFloat32(back.data(), wide.data(), wide.size(), DataType::kBFloat16, 1.0f);
  Mismatches scalar("BFloat16ToFloat/FloatToBFloat16"), bulk("WidenToFloat32/NarrowFromFloat32");
  for (uint32_t h = 0; h < 65536; ++h) {
    const double ref = RefDecode(static_cast<uint16_t>(h), kBF16);
    const float f = BFloat16ToFloat(static_cast<uint16_t>(h));
    const bool nan = std::isnan(ref);
    const uint16_t want_back = static_cast<uint16_t>(nan ? (h | 0x40) : h);
    const bool widened_ok =
        nan ? BitsOfFloat(f) == h << 16 : f == ref && std::signbit(f) == std::signbit(ref);
    scalar.Check(widened_ok && FloatToBFloat16(f) == want_back, Hex(h));
    bulk.Check(BitsOfFloat(wide[h]) == BitsOfFloat(f) && back[h] == want_back, Hex(h));
  }
}

// Float inputs where rounding decides: every midpoint between neighbouring finite values (a tie),
// one float either side of it, both signs, plus a strided sweep of all 2^32 float patterns.
std::vector<float> NarrowingInputs(Format f) {
  std::vector<float> in;
  const uint16_t max_finite = static_cast<uint16_t>(((1 << f.ebits) - 1) << f.mbits);
  for (uint16_t h = 0; h < max_finite; ++h) {
    const double next = h + 1 == max_finite ? std::ldexp(RefDecode(h, f), 0) +
                                                  std::ldexp(1.0, (1 << (f.ebits - 1)) - f.mbits)
                                            : RefDecode(static_cast<uint16_t>(h + 1), f);
    const float mid = static_cast<float>((RefDecode(h, f) + next) / 2);  // exact in float
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      in.push_back(x);
      in.push_back(-x);
    }
  }
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4093) {
    in.push_back(FloatFromBits(static_cast<uint32_t>(u)));
  }
  for (float x : {std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::denorm_min(), INFINITY, -INFINITY}) {
    in.push_back(x);
  }
  return in;
}

void CheckNarrowing(DataType dtype, uint16_t (*scalar)(float)) {
  const Format f = HalfFormat(dtype);
  const std::vector<float> in = NarrowingInputs(f);
  std::vector<uint16_t> bulk(in.size());
  NarrowFromFloat32(bulk.data(), in.data(), in.size(), dtype, 1.0f);
  Mismatches scalar_bad("scalar narrowing"), bulk_bad("NarrowFromFloat32");
  for (size_t i = 0; i < in.size(); ++i) {
    const uint16_t want = RefEncode(in[i], f);
    const uint16_t got = scalar(in[i]);
    const bool ok = std::isnan(in[i]) ? IsHalfNaN(got, f) : got == want;
    scalar_bad.Check(ok, Hex(BitsOfFloat(in[i])) + " -> " + Hex(got) + " want " + Hex(want));
    bulk_bad.Check(bulk[i] == got, Hex(BitsOfFloat(in[i])) + " bulk " + Hex(bulk[i]));
  }
}

TEST_P(HalfConversionTest, Float16NarrowingRoundsToNearestEven) {
  CheckNarrowing(DataType::kFloat16, &FloatToHalf);
}

TEST_P(HalfConversionTest, BFloat16NarrowingRoundsToNearestEven) {
  CheckNarrowing(DataType::kBFloat16, &FloatToBFloat16);
}

TEST_P(HalfConversionTest, ScaleFactorIsAppliedInFloat32) {
  const std::vector<uint16_t> h = {0x3c00, 0xc000, 0x0001, 0x7bff, 0x3555};  // 1 -2 2^-24 max 1/3
  std::vector<float> wide(h.size());
  WidenToFloat32(wide.data(), h.data(), h.size(), DataType::kFloat16, 0.5f);
  EXPECT_EQ(wide[0], 0.5f);
  EXPECT_EQ(wide[1], -1.0f);
  EXPECT_EQ(wide[2], std::ldexp(1.0f, -25));
  EXPECT_EQ(wide[3], 32752.0f);
  const std::vector<float> f = {1.0f, 65504.0f, 3.0f, std::ldexp(1.0f, -24)};
  std::vector<uint16_t> narrow(f.size());
  NarrowFromFloat32(narrow.data(), f.data(), f.size(), DataType::kFloat16, 2.0f);
  EXPECT_EQ(narrow[0], 0x4000);  // 2
  EXPECT_EQ(narrow[1], 0x7c00);  // 131008 overflows
  EXPECT_EQ(narrow[2], 0x4600);  // 6
  EXPECT_EQ(narrow[3], 0x0002);  // 2^-23, still subnormal
}

INSTANTIATE_TEST_SUITE_P(Paths, HalfConversionTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "simd" : "baseline";
                         });

TEST(HalfConversion, Float16Cases) {
  const float tie_down = 1.0f + std::ldexp(1.0f, -11);  // halfway 1 and 1+2^-10: even is 1
  EXPECT_EQ(FloatToHalf(tie_down), 0x3c00);
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie, even is up
  EXPECT_EQ(FloatToHalf(std::nextafter(tie_down, 2.0f)), 0x3c01);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // tie with the odd max: rounds to inf
  EXPECT_EQ(FloatToHalf(-65520.0f), 0xfc00);
  EXPECT_EQ(FloatToHalf(1e9f), 0x7c00);
  EXPECT_EQ(FloatToHalf(INFINITY), 0x7c00);
  EXPECT_EQ(FloatToHalf(-INFINITY), 0xfc00);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  // Subnormals, and rounding into and out of them.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie, even is 0
  EXPECT_EQ(FloatToHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(FloatToHalf(3 * std::ldexp(1.0f, -25)), 0x0002);  // tie, even is up
  EXPECT_EQ(FloatToHalf(1023 * std::ldexp(1.0f, -24)), 0x03ff);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -25)), 0x0400);  // into normal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(FloatToHalf(-std::ldexp(1.0f, -24)), 0x8001);
  EXPECT_EQ(FloatToHalf(-std::ldexp(1.0f, -26)), 0x8000);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x03ff), 1023 * std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x7c00), INFINITY);
  EXPECT_EQ(HalfToFloat(0xfc00), -INFINITY);
  EXPECT_TRUE(std::signbit(HalfToFloat(0x8000)));
  // NaN: stays NaN, keeps sign and top payload bits, becomes quiet.
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7c01)));
  EXPECT_EQ(FloatToHalf(FloatFromBits(0x7fc00000)), 0x7e00);
  EXPECT_EQ(FloatToHalf(FloatFromBits(0xffc00000)), 0xfe00);
  EXPECT_EQ(FloatToHalf(FloatFromBits(0x7f800001)), 0x7e00);  // signalling, payload below cut
  EXPECT_EQ(FloatToHalf(FloatFromBits(0x7fa00000)), 0x7f00);
}

TEST(HalfConversion, BFloat16Cases) {
  EXPECT_EQ(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie, even is down
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie, even is up
  EXPECT_EQ(FloatToBFloat16(FloatFromBits(0x3f808001)), 0x3f81);
  EXPECT_EQ(FloatToBFloat16(FloatFromBits(0x7f7f0000)), 0x7f7f);          // largest bfloat16
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
  EXPECT_EQ(FloatToBFloat16(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(FloatToBFloat16(INFINITY), 0x7f80);
  EXPECT_EQ(FloatToBFloat16(FloatFromBits(0x00010000)), 0x0001);  // subnormal kept
  EXPECT_EQ(FloatToBFloat16(FloatFromBits(0x00008000)), 0x0000);  // subnormal tie, even is 0
  EXPECT_EQ(FloatToBFloat16(FloatFromBits(0x00018000)), 0x0002);  // subnormal tie, even is up
  EXPECT_EQ(FloatToBFloat16(FloatFromBits(0x807fffff)), 0x8080);  // rounds up to -FLT_MIN
  EXPECT_EQ(FloatToBFloat16(FloatFromBits(0x7f800001)), 0x7fc0);  // NaN not rounded into inf
  EXPECT_EQ(FloatToBFloat16(FloatFromBits(0xffffffff)), 0xffff);
  EXPECT_EQ(BFloat16ToFloat(0x0001), std::ldexp(1.0f, -133));
  EXPECT_EQ(BitsOfFloat(BFloat16ToFloat(0x7f81)), 0x7f810000u);
}

// Every rank must produce the same bits whatever its CPU: the SIMD and baseline paths agree
// exactly, NaN payloads included, on random 16-bit patterns and NaN-heavy float inputs. One
// exception: when both inputs of a Sum/Product are NaN, which payload survives is up to the
// compiler (it may commute the operands), so only NaN-ness is compared there.
TEST(HalfConversion, SimdAndBaselineGiveIdenticalBits) {
  if (!internal::UseAvx2()) GTEST_SKIP() << "no AVX2/F16C here: only the baseline path exists";
  for (DataType dtype : {DataType::kFloat16, DataType::kBFloat16}) {
    const Format format = HalfFormat(dtype);
    const size_t n = 4097;
    const Buffer a = MakeData(dtype, n, 4), b = MakeData(dtype, n, 5);
    std::vector<float> f(n);
    for (size_t i = 0; i < n; ++i) {
      f[i] = FloatFromBits(static_cast<uint32_t>(Mix(i + 77)) | (i % 3 == 0 ? 0x7f800000u : 0u));
    }
    std::vector<Buffer> results[2];
    for (bool simd : {false, true}) {
      SimdScope scope(simd);
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
        Buffer out = a;
        ASSERT_TRUE(ReduceInto(out.data(), b.bytes.data(), n, dtype, op).ok());
        results[simd].push_back(out);
      }
      Buffer scaled(dtype, n);
      ASSERT_TRUE(ScaleCopy(scaled.data(), a.bytes.data(), n, dtype, 0.3).ok());
      results[simd].push_back(scaled);
      Buffer narrow(dtype, n);
      NarrowFromFloat32(narrow.data(), f.data(), n, dtype, 1.0f);
      results[simd].push_back(narrow);
      NarrowFromFloat32(narrow.data(), f.data(), n, dtype, 3.0f);
      results[simd].push_back(narrow);
    }
    for (size_t k = 0; k < results[0].size(); ++k) {
      Mismatches bad(std::string(DataTypeName(dtype)) + " result " + std::to_string(k));
      for (size_t i = 0; i < n; ++i) {
        const auto x = static_cast<uint16_t>(results[0][k].Get(i));
        const auto y = static_cast<uint16_t>(results[1][k].Get(i));
        const bool two_nans = k < 4 && IsHalfNaN(static_cast<uint16_t>(a.Get(i)), format) &&
                              IsHalfNaN(static_cast<uint16_t>(b.Get(i)), format);
        bad.Check(two_nans ? IsHalfNaN(x, format) && IsHalfNaN(y, format) : x == y,
                  "index " + std::to_string(i) + ": " + Hex(x) + " vs " + Hex(y));
      }
    }
  }
}

// ---- semantics spelled out in reduce.h
// ------------------------------------------------------------

template <typename T>
std::vector<T> Reduced(std::vector<T> a, const std::vector<T>& b, DataType dtype, ReduceOp op) {
  EXPECT_TRUE(ReduceInto(a.data(), b.data(), a.size(), dtype, op).ok());
  return a;
}

TEST(ReduceSemantics, IntegersWrap) {
  EXPECT_EQ(Reduced<int8_t>({127, -128}, {1, -1}, DataType::kInt8, ReduceOp::kSum),
            (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(Reduced<uint8_t>({255}, {1}, DataType::kUInt8, ReduceOp::kSum),
            (std::vector<uint8_t>{0}));
  EXPECT_EQ(Reduced<int16_t>({-32768}, {-1}, DataType::kInt16, ReduceOp::kProduct),
            (std::vector<int16_t>{-32768}));
  EXPECT_EQ(Reduced<uint16_t>({65535}, {65535}, DataType::kUInt16, ReduceOp::kProduct),
            (std::vector<uint16_t>{1}));
  EXPECT_EQ(Reduced<int32_t>({INT32_MAX}, {1}, DataType::kInt32, ReduceOp::kSum),
            (std::vector<int32_t>{INT32_MIN}));
  EXPECT_EQ(Reduced<int64_t>({INT64_MAX, INT64_MIN}, {1, -1}, DataType::kInt64, ReduceOp::kSum),
            (std::vector<int64_t>{INT64_MIN, INT64_MAX}));
  EXPECT_EQ(Reduced<int64_t>({int64_t{1} << 62}, {4}, DataType::kInt64, ReduceOp::kProduct),
            (std::vector<int64_t>{0}));
}

TEST(ReduceSemantics, BoolIsLogical) {
  const std::vector<uint8_t> a = {0, 0, 1, 1, 2, 0xff}, b = {0, 1, 0, 1, 0, 2};
  const std::vector<uint8_t> any = {0, 1, 1, 1, 1, 1}, all = {0, 0, 0, 1, 0, 1};
  EXPECT_EQ(Reduced(a, b, DataType::kBool, ReduceOp::kSum), any);
  EXPECT_EQ(Reduced(a, b, DataType::kBool, ReduceOp::kMax), any);
  EXPECT_EQ(Reduced(a, b, DataType::kBool, ReduceOp::kMin), all);
  EXPECT_EQ(Reduced(a, b, DataType::kBool, ReduceOp::kProduct), all);
}

TEST(ReduceSemantics, MinMaxKeepANaNInInout) {
  const float nan = std::nanf("");
  const auto mn = Reduced<float>({nan, 1.0f, 0.0f, -0.0f}, {1.0f, nan, -0.0f, 0.0f},
                                 DataType::kFloat32, ReduceOp::kMin);
  EXPECT_TRUE(std::isnan(mn[0]));
  EXPECT_EQ(mn[1], 1.0f);
  EXPECT_FALSE(std::signbit(mn[2]));  // std::min(+0, -0) is its first argument
  EXPECT_TRUE(std::signbit(mn[3]));
  const auto mx = Reduced<double>({NAN, 1.0}, {1.0, NAN}, DataType::kFloat64, ReduceOp::kMax);
  EXPECT_TRUE(std::isnan(mx[0]));
  EXPECT_EQ(mx[1], 1.0);
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    const uint16_t one = t == DataType::kFloat16 ? 0x3c00 : 0x3f80;
    const uint16_t qnan = t == DataType::kFloat16 ? 0x7e00 : 0x7fc0;
    for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
      const auto r = Reduced<uint16_t>({qnan, one}, {one, qnan}, t, op);
      EXPECT_EQ(r, (std::vector<uint16_t>{qnan, one})) << DataTypeName(t);
    }
  }
}

TEST(ReduceSemantics, HalvesRoundOnceThroughFloat32) {
  // 2048 + 1 is a tie in float16 (spacing 2 above 2048): even is 2048. 1 + 2^-11 likewise.
  EXPECT_EQ(
      Reduced<uint16_t>({0x6800, 0x3c00}, {0x3c00, 0x1000}, DataType::kFloat16, ReduceOp::kSum),
      (std::vector<uint16_t>{0x6800, 0x3c00}));
  // 65504 + 65504 overflows to inf; 2^-24 * 0.5 underflows to 0 (tie, even).
  EXPECT_EQ(
      Reduced<uint16_t>({0x7bff, 0x0001}, {0x7bff, 0x3800}, DataType::kFloat16, ReduceOp::kSum)[0],
      0x7c00);
  EXPECT_EQ(Reduced<uint16_t>({0x0001}, {0x3800}, DataType::kFloat16, ReduceOp::kProduct)[0],
            0x0000);
  EXPECT_EQ(Reduced<uint16_t>({0x3f80}, {0x3b80}, DataType::kBFloat16, ReduceOp::kSum)[0],
            0x3f80);  // 1 + 2^-8: tie, even is 1
}

TEST(ScaleDivideSemantics, IntegersTruncateTowardZero) {
  std::vector<int32_t> v = {-7, 7, -8, INT32_MIN, INT32_MAX, 0, -1}, out(v.size());
  ASSERT_TRUE(DivideCopy(out.data(), v.data(), v.size(), DataType::kInt32, 2).ok());
  EXPECT_EQ(out, (std::vector<int32_t>{-3, 3, -4, -1073741824, 1073741823, 0, 0}));
  ASSERT_TRUE(ScaleCopy(out.data(), v.data(), 3, DataType::kInt32, 0.5).ok());
  EXPECT_EQ(std::vector<int32_t>(out.begin(), out.begin() + 3), (std::vector<int32_t>{-3, 3, -4}));
  std::vector<int64_t> big = {INT64_MIN, INT64_MAX, -5};
  ASSERT_TRUE(DivideCopy(big.data(), big.data(), big.size(), DataType::kInt64, 3).ok());
  EXPECT_EQ(big, (std::vector<int64_t>{INT64_MIN / 3, INT64_MAX / 3, -1}));
}

TEST(ScaleDivideSemantics, IntegerScaleOutOfRangeIsDefined) {
  std::vector<int8_t> i8 = {100, -100, 5};
  ASSERT_TRUE(ScaleCopy(i8.data(), i8.data(), i8.size(), DataType::kInt8, 3.0).ok());
  EXPECT_EQ(i8, (std::vector<int8_t>{127, -128, 15}));  // saturates
  std::vector<uint8_t> u8 = {5, 200};
  ASSERT_TRUE(ScaleCopy(u8.data(), u8.data(), u8.size(), DataType::kUInt8, -1.0).ok());
  EXPECT_EQ(u8, (std::vector<uint8_t>{0, 0}));
  std::vector<int64_t> i64 = {INT64_MAX, int64_t{1} << 62, -(int64_t{1} << 62), 1};
  ASSERT_TRUE(ScaleCopy(i64.data(), i64.data(), 3, DataType::kInt64, 2.0).ok());
  EXPECT_EQ(i64, (std::vector<int64_t>{INT64_MAX, INT64_MAX, INT64_MIN, 1}));
  ASSERT_TRUE(ScaleCopy(i64.data(), i64.data(), i64.size(), DataType::kInt64, NAN).ok());
  EXPECT_EQ(i64, (std::vector<int64_t>{0, 0, 0, 0}));
}

TEST(ScaleDivideSemantics, FactorOneCopiesExactly) {
  std::vector<uint32_t> bits = {0x7f800001, 0xffc01234, 0x00000001}, out(3);
  ASSERT_TRUE(ScaleCopy(out.data(), bits.data(), 3, DataType::kFloat32, 1.0).ok());
  EXPECT_EQ(out, bits);  // signalling NaN payload untouched
  std::vector<uint8_t> flags = {1, 0, 1}, copy(3);
  ASSERT_TRUE(ScaleCopy(copy.data(), flags.data(), 3, DataType::kBool, 1.0).ok());
  EXPECT_EQ(copy, flags);
}

// ---- errors -------------------------------------------------------------------------------------

TEST(ReduceErrors, NonKernelOpsAreRefusedWithContext) {
  float a[2] = {1, 2}, b[2] = {3, 4};
  const Status avg = ReduceInto(a, b, 2, DataType::kFloat32, ReduceOp::kAverage);
  EXPECT_EQ(avg.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(avg.message().find("average"), std::string::npos) << avg.ToString();
  EXPECT_NE(avg.message().find("float32"), std::string::npos) << avg.ToString();
  const Status ada = ReduceInto(a, b, 2, DataType::kBFloat16, ReduceOp::kAdasum);
  EXPECT_EQ(ada.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ada.message().find("adasum"), std::string::npos) << ada.ToString();
  EXPECT_NE(ada.message().find("bfloat16"), std::string::npos) << ada.ToString();
  EXPECT_EQ(a[0], 1);  // untouched
  EXPECT_EQ(ReduceInto(a, b, 2, DataType::kFloat32, static_cast<ReduceOp>(9)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ReduceInto(nullptr, nullptr, 0, DataType::kInt8, ReduceOp::kAverage).code(),
            StatusCode::kInvalidArgument);  // refused even when there is nothing to do
}

TEST(ReduceErrors, InvalidDtypeIsRefused) {
  const DataType bad = static_cast<DataType>(42);
  char buf[8] = {};
  EXPECT_EQ(ReduceInto(buf, buf, 1, bad, ReduceOp::kSum).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ScaleCopy(buf, buf, 1, bad, 2.0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DivideCopy(buf, buf, 1, bad, 2).code(), StatusCode::kInvalidArgument);
}

TEST(ReduceErrors, BoolCannotBeScaledOrDivided) {
  uint8_t flags[2] = {1, 0};
  const Status s = ScaleCopy(flags, flags, 2, DataType::kBool, 2.0);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("bool"), std::string::npos) << s.ToString();
  EXPECT_EQ(DivideCopy(flags, flags, 2, DataType::kBool, 2).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DivideCopy(flags, flags, 2, DataType::kBool, 1).code(), StatusCode::kInvalidArgument);
}

TEST(ReduceErrors, DivisorMustBePositive) {
  int32_t v[1] = {7};
  EXPECT_EQ(DivideCopy(v, v, 1, DataType::kInt32, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DivideCopy(v, v, 1, DataType::kInt32, -2).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DivideCopy(v, v, 1, DataType::kFloat32, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(v[0], 7);
}

TEST(ReduceErrors, EmptyCallsSucceedWithNullPointers) {
  for (DataType t : AllDtypes()) {
    EXPECT_TRUE(ReduceInto(nullptr, nullptr, 0, t, ReduceOp::kSum).ok()) << DataTypeName(t);
    EXPECT_TRUE(ScaleCopy(nullptr, nullptr, 0, t, 1.0).ok()) << DataTypeName(t);
    if (t != DataType::kBool) {
      EXPECT_TRUE(ScaleCopy(nullptr, nullptr, 0, t, 0.5).ok()) << DataTypeName(t);
      EXPECT_TRUE(DivideCopy(nullptr, nullptr, 0, t, 4).ok()) << DataTypeName(t);
    }
  }
  WidenToFloat32(nullptr, nullptr, 0, DataType::kFloat16, 1.0f);
  NarrowFromFloat32(nullptr, nullptr, 0, DataType::kBFloat16, 1.0f);
}

TEST(ReduceErrorsDeathTest, WidenOfANonHalfDtypeAborts) {
  float dst[1];
  const float src[1] = {1.0f};
  EXPECT_DEATH(WidenToFloat32(dst, src, 1, DataType::kFloat32, 1.0f), "not float16 or bfloat16");
  EXPECT_DEATH(NarrowFromFloat32(dst, src, 1, DataType::kInt16, 1.0f), "not float16 or bfloat16");
}

}  // namespace
}  // namespace kolo::reduce_testing
