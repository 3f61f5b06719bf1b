// Tier 2: every collective of the C API under mpirun, against references computed locally from
// every rank's known inputs (test_util), never with kolo.
//
//  - all-reduce: 11 dtypes x 5 reduce ops (bool x Average refused), counts 1, 7, 1000, 70000,
//    shapes of 1-3 dims, in-place and out-of-place (input untouched), scale factors;
//  - zero-element tensors, scalars (ndim 0), argument checks at submission;
//  - Adasum against its tree reference (or, at 3 ranks, refused naming the count).
// All-gather, broadcast and names: collectives_gather_test.cc.
#include <kolo/kolo.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "collectives_params.h"
#include "test_util.h"
#include "unit/adasum_reference.h"

namespace kolo_test {
namespace {

struct ReduceCase {
  kolo_dtype_t dtype;
  kolo_reduce_op_t op;
};

// gtest prints parameters of failed tests with this.
void PrintTo(const ReduceCase& c, std::ostream* os) {
  *os << DtypeName(c.dtype) << " " << ReduceOpName(c.op);
}

std::vector<ReduceCase> AllReduceCases() {
  std::vector<ReduceCase> cases;
  for (kolo_dtype_t dtype : AllDtypes()) {
    for (kolo_reduce_op_t op : ReduceOps()) {
      if (dtype == KOLO_BOOL && op == KOLO_OP_AVERAGE) continue;  // refused: its own test
      cases.push_back({dtype, op});
    }
  }
  return cases;
}

std::string ReduceCaseName(const ::testing::TestParamInfo<ReduceCase>& info) {
  return std::string(DtypeName(info.param.dtype)) + "_" + ReduceOpName(info.param.op);
}

// One all-reduce in flight: its buffers, a copy of its input and its handle.
struct ReduceItem {
  std::string name;
  int64_t count = 0;
  uint64_t seed = 0;
  bool in_place = false;
  bool submitted = false;
  double prescale = 1.0, postscale = 1.0;
  TypedBuffer input, original, output;
  Handle handle;
};

// Submits one all-reduce of rank-unique data (out-of-place output pre-filled with a sentinel).
std::unique_ptr<ReduceItem> SubmitReduceItem(const std::string& name, kolo_dtype_t dtype,
                                             int64_t count, kolo_reduce_op_t op, bool in_place,
                                             uint64_t seed, double prescale = 1.0,
                                             double postscale = 1.0) {
  auto item = std::make_unique<ReduceItem>();
  item->name = name;
  item->count = count;
  item->seed = seed;
  item->in_place = in_place;
  item->prescale = prescale;
  item->postscale = postscale;
  const bool scaled = prescale != 1.0 || postscale != 1.0;
  item->input = RankUniqueData(dtype, count, WorldRank(), KindFor(dtype, op, scaled), seed);
  item->original = item->input;
  if (!in_place) {
    item->output = TypedBuffer(dtype, count);
    item->output.FillSentinel();
  }
  const kolo_status_t s = SubmitAllreduce(name, item->input, in_place ? nullptr : &item->output,
                                          ShapeFor(count), op, item->handle, prescale, postscale);
  EXPECT_EQ(s, KOLO_SUCCESS) << "rank " << WorldRank() << ": submitting '" << name
                             << "': " << LastError();
  item->submitted = (s == KOLO_SUCCESS);
  return item;
}

// Waits for the item and checks it against the reference built from every rank's input.
void CheckReduceItem(ReduceItem& item, kolo_reduce_op_t op) {
  if (!item.submitted) return;
  const kolo_status_t s = WaitHandle(item.handle, item.name);
  ASSERT_EQ(s, KOLO_SUCCESS) << "rank " << WorldRank() << ": '" << item.name
                             << "': " << kolo_handle_message(item.handle.get());
  EXPECT_STREQ(kolo_handle_message(item.handle.get()), "");
  const kolo_dtype_t dtype = item.input.dtype;
  const bool scaled = item.prescale != 1.0 || item.postscale != 1.0;
  const Reference ref = AllreduceReference(
      AllRanksData(dtype, item.count, WorldSize(), KindFor(dtype, op, scaled), item.seed), op,
      item.prescale, item.postscale);
  const void* result = item.in_place ? item.input.data() : item.output.data();
  EXPECT_MATCHES_REFERENCE(result, ref) << " ('" << item.name << "')";
  if (!item.in_place) {
    EXPECT_BUFFERS_EQUAL(item.input, item.original) << " input of out-of-place '" << item.name
                                                    << "' was modified";
  }
}

// ---- all-reduce: every dtype x every reduce op ---------------------------------------------------

class CollectivesAllreduce : public ::testing::TestWithParam<ReduceCase> {};

TEST_P(CollectivesAllreduce, MatchesReference) {
  const auto [dtype, op] = GetParam();
  std::vector<std::unique_ptr<ReduceItem>> items;
  // All in flight at once: out-of-place and in-place, several sizes and shapes.
  for (int64_t count : {1, 7, 1000, 70000}) {
    for (bool in_place : {false, true}) {
      const std::string name =
          TensorName(std::to_string(count) + (in_place ? "/inplace" : "/outofplace"));
      items.push_back(SubmitReduceItem(name, dtype, count, op, in_place,
                                       static_cast<uint64_t>(count) * 2 + in_place));
    }
  }
  for (auto& item : items) CheckReduceItem(*item, op);
}

INSTANTIATE_TEST_SUITE_P(Ops, CollectivesAllreduce, ::testing::ValuesIn(AllReduceCases()),
                         ReduceCaseName);

// ---- all-reduce with prescale / postscale -------------------------------------------------------

struct ScaleCase {
  kolo_reduce_op_t op;
  double prescale, postscale;
  bool floats_only;  // integer results would depend on where the division by size happens
};

class CollectivesScaled : public ::testing::TestWithParam<kolo_dtype_t> {};

TEST_P(CollectivesScaled, MatchesReference) {
  const kolo_dtype_t dtype = GetParam();
  const std::vector<ScaleCase> cases = {
      {KOLO_OP_SUM, 0.5, 4.0, false},      // dyadic: exact for floats; integers truncate x*0.5
      {KOLO_OP_SUM, 2.5, 0.75, false},     // not dyadic: floats get a few ulps
      {KOLO_OP_AVERAGE, 2.0, 1.0, false},  // integer Average: only a prescale is unambiguous
      {KOLO_OP_AVERAGE, 0.5, 4.0, true},
      {KOLO_OP_AVERAGE, 0.3, 1.7, true},
      {KOLO_OP_MAX, 3.0, 0.5, false},
      {KOLO_OP_MIN, 0.25, 2.0, false},
      {KOLO_OP_PRODUCT, 2.0, 0.5, false},
  };
  std::vector<std::pair<std::unique_ptr<ReduceItem>, kolo_reduce_op_t>> items;
  int index = 0;
  for (const ScaleCase& c : cases) {
    ++index;
    if (c.floats_only && !IsFloat(dtype)) continue;
    for (int64_t count : {7, 1000}) {
      for (bool in_place : {false, true}) {
        const std::string name = TensorName(std::string(ReduceOpName(c.op)) + "/" +
                                            std::to_string(index) + "/" + std::to_string(count) +
                                            (in_place ? "/inplace" : ""));
        items.emplace_back(SubmitReduceItem(name, dtype, count, c.op, in_place,
                                            static_cast<uint64_t>(index * 100 + count + in_place),
                                            c.prescale, c.postscale),
                           c.op);
      }
    }
  }
  for (auto& [item, op] : items) CheckReduceItem(*item, op);
}

std::vector<kolo_dtype_t> NonBoolDtypes() {
  std::vector<kolo_dtype_t> v;
  for (kolo_dtype_t d : AllDtypes()) {
    if (d != KOLO_BOOL) v.push_back(d);
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CollectivesScaled, ::testing::ValuesIn(NonBoolDtypes()),
                         DtypeParamName);

// ---- integer Average truncates toward zero ------------------------------------------------------

TEST(CollectivesAllreduceSemantics, IntegerAverageTruncatesTowardZero) {
  const int rank = WorldRank(), size = WorldSize();
  for (kolo_dtype_t dtype : AllDtypes()) {
    if (!IsInteger(dtype)) continue;
    SCOPED_TRACE(DtypeName(dtype));
    // Index 0: rank 0 gives n+1-(n-1)=2, others 1 -> sum n+1 -> 1 (n >= 2).
    // Signed only: index 1: rank 0 gives 0, others -1 -> sum -(n-1) -> 0 (floor would be -1);
    //              index 2: rank 0 gives -2, others -1 -> sum -(n+1) -> -1 (floor would be -2).
    const int64_t count = IsSigned(dtype) ? 3 : 1;
    TypedBuffer in(dtype, count), out(dtype, count);
    out.FillSentinel();
    StoreInt(dtype, in.data(), 0, rank == 0 ? 2 : 1);
    if (IsSigned(dtype)) {
      StoreInt(dtype, in.data(), 1, rank == 0 ? 0 : -1);
      StoreInt(dtype, in.data(), 2, rank == 0 ? -2 : -1);
    }
    Handle h;
    ASSERT_EQ(SubmitAllreduce(TensorName(DtypeName(dtype)), in, &out, {count}, KOLO_OP_AVERAGE, h),
              KOLO_SUCCESS)
        << LastError();
    ASSERT_EQ(WaitHandle(h, DtypeName(dtype)), KOLO_SUCCESS) << kolo_handle_message(h.get());
    EXPECT_EQ(LoadInt(dtype, out.data(), 0), (size + 1) / size);
    if (IsSigned(dtype)) {
      EXPECT_EQ(LoadInt(dtype, out.data(), 1), 0) << "sum " << -(size - 1) << " / " << size;
      EXPECT_EQ(LoadInt(dtype, out.data(), 2), -1) << "sum " << -(size + 1) << " / " << size;
    }
  }
}

// Sum of integers wraps in the dtype (checked explicitly at the extremes, besides the random
// data): every rank contributes the dtype's maximum, so the sum is size * max modulo 2^bits.
// 1 element and 1000 (long enough for vectorised reduction kernels).
TEST(CollectivesAllreduceSemantics, IntegerSumWrapsInDtype) {
  const int size = WorldSize();
  for (kolo_dtype_t dtype : AllDtypes()) {
    if (!IsInteger(dtype)) continue;
    SCOPED_TRACE(DtypeName(dtype));
    const int bits = IntegerBits(dtype);
    const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
    const uint64_t max_bits = IsSigned(dtype) ? (mask >> 1) : mask;
    for (int64_t count : {1, 1000}) {
      TypedBuffer in(dtype, count), out(dtype, count);
      Reference ref;
      ref.expected = TypedBuffer(dtype, count);
      for (int64_t i = 0; i < count; ++i) {
        StoreInt(dtype, in.data(), i, static_cast<int64_t>(max_bits));
        StoreInt(dtype, ref.expected.data(), i,
                 static_cast<int64_t>((max_bits * static_cast<uint64_t>(size)) & mask));
      }
      Handle h;
      const std::string name = TensorName(std::string(DtypeName(dtype)) + "/" + std::to_string(count));
      ASSERT_EQ(SubmitAllreduce(name, in, &out, {count}, KOLO_OP_SUM, h), KOLO_SUCCESS)
          << LastError();
      ASSERT_EQ(WaitHandle(h, name), KOLO_SUCCESS) << kolo_handle_message(h.get());
      EXPECT_MATCHES_REFERENCE(out.data(), ref) << " (" << size << " x max of " << DtypeName(dtype) << ")";
    }
  }
}

// float16 / bfloat16 are reduced in float32 and rounded once: 2048 + 1 + 1 (+1 ...) in float16
// would stay 2048 if rounded after every step; rounded once it is 2048 + (size - 1), rounded.
TEST(CollectivesAllreduceSemantics, HalfTypesRoundOnceAtTheEnd) {
  const int rank = WorldRank(), size = WorldSize();
  for (kolo_dtype_t dtype : {KOLO_FLOAT16, KOLO_BFLOAT16}) {
    SCOPED_TRACE(DtypeName(dtype));
    const double big = dtype == KOLO_FLOAT16 ? 2048.0 : 256.0;  // ulp above it is 2
    TypedBuffer in(dtype, 2), out(dtype, 2);
    StoreFloat(dtype, in.data(), 0, rank == 0 ? big : 1.0);
    StoreFloat(dtype, in.data(), 1, rank == size - 1 ? big : 1.0);  // the big value last
    Handle h;
    ASSERT_EQ(SubmitAllreduce(TensorName(DtypeName(dtype)), in, &out, {2}, KOLO_OP_SUM, h),
              KOLO_SUCCESS)
        << LastError();
    ASSERT_EQ(WaitHandle(h, DtypeName(dtype)), KOLO_SUCCESS) << kolo_handle_message(h.get());
    TypedBuffer want(dtype, 1);
    StoreFloat(dtype, want.data(), 0, big + (size - 1));  // one rounding, ties to even
    EXPECT_EQ(LoadFloat(dtype, out.data(), 0), LoadFloat(dtype, want.data(), 0));
    EXPECT_EQ(LoadFloat(dtype, out.data(), 1), LoadFloat(dtype, want.data(), 0));
  }
}

// ---- refusals at submission ---------------------------------------------------------------------

TEST(CollectivesRefused, BoolAverageIsInvalidArgument) {
  TypedBuffer in = RankUniqueData(KOLO_BOOL, 10, WorldRank(), DataKind::kWide);
  const TypedBuffer original = in;
  TypedBuffer out(KOLO_BOOL, 10);
  out.FillSentinel();
  const TypedBuffer sentinel = out;
  Handle h;
  EXPECT_EQ(SubmitAllreduce(TensorName("avg"), in, &out, {10}, KOLO_OP_AVERAGE, h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_STRNE(kolo_last_error(), "");
  Handle h2;
  EXPECT_EQ(SubmitAllreduce(TensorName("avg-inplace"), in, nullptr, {10}, KOLO_OP_AVERAGE, h2),
            KOLO_ERR_INVALID_ARGUMENT);
  h.Reset();
  h2.Reset();
  EXPECT_BUFFERS_EQUAL(in, original);
  EXPECT_BUFFERS_EQUAL(out, sentinel);
}

TEST(CollectivesRefused, BoolScaleFactorsMustBeOne) {
  TypedBuffer in = RankUniqueData(KOLO_BOOL, 10, WorldRank(), DataKind::kWide);
  TypedBuffer out(KOLO_BOOL, 10);
  Handle h1, h2;
  EXPECT_EQ(SubmitAllreduce(TensorName("pre"), in, &out, {10}, KOLO_OP_SUM, h1, 2.0, 1.0),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(SubmitAllreduce(TensorName("post"), in, &out, {10}, KOLO_OP_MAX, h2, 1.0, 0.5),
            KOLO_ERR_INVALID_ARGUMENT);
}

// Adasum at a power-of-two rank count: each tensor against the tree reference
// (tests/unit/adasum_reference.h) of every rank's input, rebuilt locally; several tensors in
// flight at once, so they may fuse. At other counts every rank is refused at submission with
// KOLO_ERR_UNIMPLEMENTED naming the count. Integers are refused at any count.
TEST(CollectivesAdasum, MatchesTheTreeReferenceOrNamesTheRankCount) {
  const int size = WorldSize();
  const bool pof2 = (size & (size - 1)) == 0;
  const int levels = static_cast<int>(std::log2(size));
  for (kolo_dtype_t dtype : {KOLO_FLOAT32, KOLO_FLOAT16, KOLO_FLOAT64, KOLO_BFLOAT16}) {
    SCOPED_TRACE(DtypeName(dtype));
    std::vector<int64_t> counts = {16, 3, 1000};
    std::vector<TypedBuffer> in, out;
    std::vector<Handle> handles(counts.size());
    for (size_t k = 0; k < counts.size(); ++k) {
      in.push_back(RankUniqueData(dtype, counts[k], WorldRank(), DataKind::kWide, 90 + k));
      out.emplace_back(dtype, counts[k]);
      const std::string name = TensorName(std::string(DtypeName(dtype)) + "/" + std::to_string(k));
      const kolo_status_t s =
          SubmitAllreduce(name, in[k], &out[k], {counts[k]}, KOLO_OP_ADASUM, handles[k]);
      if (!pof2) {
        EXPECT_EQ(s, KOLO_ERR_UNIMPLEMENTED);
        EXPECT_NE(LastError().find("has " + std::to_string(size)), std::string::npos)
            << LastError();
        continue;
      }
      ASSERT_EQ(s, KOLO_SUCCESS) << LastError();
    }
    if (!pof2) continue;
    for (size_t k = 0; k < counts.size(); ++k) {
      ASSERT_EQ(WaitHandle(handles[k], "adasum"), KOLO_SUCCESS)
          << kolo_handle_message(handles[k].get());
      const std::vector<TypedBuffer> all =
          AllRanksData(dtype, counts[k], size, DataKind::kWide, 90 + k);
      std::vector<std::vector<double>> inputs(size, std::vector<double>(counts[k]));
      double scale = 0;  // bounds every value on the way
      for (int r = 0; r < size; ++r) {
        double largest = 0;
        for (int64_t i = 0; i < counts[k]; ++i) {
          inputs[r][i] = LoadFloat(dtype, all[r].data(), i);
          largest = std::max(largest, std::fabs(inputs[r][i]));
        }
        scale += largest;
      }
      const std::vector<double> want = kolo::testing::AdasumReference(inputs);
      // Reduced in float32 (float64 for float64), rounded once to the dtype at the end.
      const double wire = dtype == KOLO_FLOAT64 ? std::ldexp(1, -53) : std::ldexp(1, -24);
      const double store = dtype == KOLO_FLOAT16    ? std::ldexp(1, -11)
                           : dtype == KOLO_BFLOAT16 ? std::ldexp(1, -8)
                                                    : wire;
      const double tol = (4 * (levels + 1) * wire + 2 * store) * scale;
      int wrong = 0;
      for (int64_t i = 0; i < counts[k]; ++i) {
        const double got = LoadFloat(dtype, out[k].data(), i);
        if (!(std::fabs(got - want[i]) <= tol) && wrong++ == 0) {
          ADD_FAILURE() << "tensor " << k << ": first wrong index " << i << ": expected "
                        << want[i] << ", got " << got << " (tolerance " << tol << ")";
        }
      }
      EXPECT_EQ(wrong, 0) << "tensor " << k << " of " << counts[k];
    }
  }
  TypedBuffer ints = RankUniqueData(KOLO_INT32, 16, WorldRank(), DataKind::kWide);
  TypedBuffer ints_out(KOLO_INT32, 16);
  Handle h;
  EXPECT_EQ(SubmitAllreduce(TensorName("int32"), ints, &ints_out, {16}, KOLO_OP_ADASUM, h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("floating-point"), std::string::npos) << LastError();
}

TEST(CollectivesRefused, BadArgumentsAreInvalidArgument) {
  const int size = WorldSize();
  float in[12] = {0}, out[12] = {0};
  const int64_t shape[2] = {3, 4};
  kolo_handle_t raw = nullptr;
  auto expect_invalid = [&](kolo_status_t s, const char* what) {
    EXPECT_EQ(s, KOLO_ERR_INVALID_ARGUMENT) << what << " (" << LastError() << ")";
    if (s == KOLO_SUCCESS && raw != nullptr) {  // accepted by mistake: do not leak it in flight
      Handle owner;
      *owner.out() = raw;
    }
    raw = nullptr;
  };
  const std::string n = TensorName("x");
  expect_invalid(kolo_allreduce_async(nullptr, in, out, KOLO_FLOAT32, 2, shape, KOLO_OP_SUM, 1, 1,
                                      &raw),
                 "NULL name");
  EXPECT_EQ(kolo_allreduce_async(n.c_str(), in, out, KOLO_FLOAT32, 2, shape, KOLO_OP_SUM, 1, 1,
                                 nullptr),
            KOLO_ERR_INVALID_ARGUMENT)
      << "NULL handle";
  expect_invalid(kolo_allreduce_async(n.c_str(), in, out, static_cast<kolo_dtype_t>(99), 2, shape,
                                      KOLO_OP_SUM, 1, 1, &raw),
                 "dtype 99");
  expect_invalid(kolo_allreduce_async(n.c_str(), in, out, static_cast<kolo_dtype_t>(-1), 2, shape,
                                      KOLO_OP_SUM, 1, 1, &raw),
                 "dtype -1");
  expect_invalid(kolo_allreduce_async(n.c_str(), in, out, KOLO_FLOAT32, 2, shape,
                                      static_cast<kolo_reduce_op_t>(99), 1, 1, &raw),
                 "reduce op 99");
  expect_invalid(kolo_allreduce_async(n.c_str(), in, out, KOLO_FLOAT32, -1, shape, KOLO_OP_SUM, 1,
                                      1, &raw),
                 "ndim -1");
  int64_t big_shape[KOLO_MAX_DIMS + 1];
  for (int64_t& d : big_shape) d = 1;
  expect_invalid(kolo_allreduce_async(n.c_str(), in, out, KOLO_FLOAT32, KOLO_MAX_DIMS + 1,
                                      big_shape, KOLO_OP_SUM, 1, 1, &raw),
                 "ndim KOLO_MAX_DIMS + 1");
  const int64_t negative[2] = {3, -4};
  expect_invalid(kolo_allreduce_async(n.c_str(), in, out, KOLO_FLOAT32, 2, negative, KOLO_OP_SUM,
                                      1, 1, &raw),
                 "negative extent");
  expect_invalid(kolo_broadcast_async(nullptr, in, out, KOLO_FLOAT32, 2, shape, 0, &raw),
                 "broadcast NULL name");
  expect_invalid(kolo_broadcast_async(n.c_str(), in, out, KOLO_FLOAT32, 2, shape, -1, &raw),
                 "broadcast root -1");
  expect_invalid(kolo_broadcast_async(n.c_str(), in, out, KOLO_FLOAT32, 2, shape, size, &raw),
                 "broadcast root == size");
  expect_invalid(kolo_broadcast_async(n.c_str(), in, out, static_cast<kolo_dtype_t>(11), 2, shape,
                                      0, &raw),
                 "broadcast dtype 11");
  EXPECT_EQ(kolo_broadcast_async(n.c_str(), in, out, KOLO_FLOAT32, 2, shape, 0, nullptr),
            KOLO_ERR_INVALID_ARGUMENT)
      << "broadcast NULL handle";
  expect_invalid(kolo_allgather_async(nullptr, in, KOLO_FLOAT32, 2, shape, &raw),
                 "allgather NULL name");
  expect_invalid(kolo_allgather_async(n.c_str(), in, KOLO_FLOAT32, 0, shape, &raw),
                 "allgather ndim 0");
  expect_invalid(kolo_allgather_async(n.c_str(), in, KOLO_FLOAT32, KOLO_MAX_DIMS + 1, big_shape,
                                      &raw),
                 "allgather ndim KOLO_MAX_DIMS + 1");
  EXPECT_EQ(kolo_allgather_async(n.c_str(), in, KOLO_FLOAT32, 2, shape, nullptr),
            KOLO_ERR_INVALID_ARGUMENT)
      << "allgather NULL handle";
  for (float v : out) EXPECT_EQ(v, 0.0f) << "a refused submission wrote its output";
}

// ---- zero elements and scalars ------------------------------------------------------------------

TEST(CollectivesShapes, ZeroElementTensors) {
  const int last = WorldSize() - 1;
  for (kolo_dtype_t dtype : AllDtypes()) {
    SCOPED_TRACE(DtypeName(dtype));
    const std::string d = DtypeName(dtype);
    TypedBuffer a(dtype, 0), b(dtype, 0), c(dtype, 0), bo(dtype, 0), g(dtype, 0);
    TypedBuffer a_out(dtype, 0);
    Handle h1, h2, h3, h4, h5;
    const kolo_reduce_op_t op = dtype == KOLO_BOOL ? KOLO_OP_SUM : KOLO_OP_AVERAGE;
    EXPECT_EQ(SubmitAllreduce(TensorName(d + "/ar"), a, &a_out, {0}, op, h1), KOLO_SUCCESS)
        << LastError();
    EXPECT_EQ(SubmitAllreduce(TensorName(d + "/ar-inplace-3d"), b, nullptr, {3, 0, 2},
                              KOLO_OP_SUM, h2),
              KOLO_SUCCESS)
        << LastError();
    EXPECT_EQ(SubmitBroadcast(TensorName(d + "/bc"), c, &bo, {0, 4}, last, h3), KOLO_SUCCESS)
        << LastError();
    EXPECT_EQ(SubmitAllgather(TensorName(d + "/ag"), g, {0, 5}, h4), KOLO_SUCCESS) << LastError();
    EXPECT_EQ(SubmitAllgather(TensorName(d + "/ag-1d"), g, {0}, h5), KOLO_SUCCESS) << LastError();
    for (Handle* h : {&h1, &h2, &h3, &h4, &h5}) {
      if (*h) {
        EXPECT_EQ(WaitHandle(*h, d), KOLO_SUCCESS) << kolo_handle_message(h->get());
      }
    }
    if (h4 && kolo_handle_status(h4.get()) == KOLO_SUCCESS) {
      const void* data = nullptr;
      int ndim = -1;
      int64_t shape[KOLO_MAX_DIMS] = {0};
      ASSERT_EQ(kolo_handle_output(h4.get(), &data, &ndim, shape), KOLO_SUCCESS);
      EXPECT_EQ(ndim, 2);
      EXPECT_EQ(shape[0], 0);
      EXPECT_EQ(shape[1], 5);
    }
    if (h5 && kolo_handle_status(h5.get()) == KOLO_SUCCESS) {
      const void* data = nullptr;
      int ndim = -1;
      int64_t shape[KOLO_MAX_DIMS] = {0};
      ASSERT_EQ(kolo_handle_output(h5.get(), &data, &ndim, shape), KOLO_SUCCESS);
      EXPECT_EQ(ndim, 1);
      EXPECT_EQ(shape[0], 0);
    }
  }
}

TEST(CollectivesShapes, Scalars) {
  const int rank = WorldRank(), size = WorldSize(), last = size - 1;
  for (kolo_dtype_t dtype : AllDtypes()) {
    SCOPED_TRACE(DtypeName(dtype));
    const std::string d = DtypeName(dtype);
    for (kolo_reduce_op_t op : {KOLO_OP_SUM, KOLO_OP_MAX}) {
      const DataKind kind = KindFor(dtype, op, false);
      TypedBuffer in = RankUniqueData(dtype, 1, rank, kind, 77);
      const TypedBuffer original = in;
      TypedBuffer out(dtype, 1);
      out.FillSentinel();
      Handle h;
      ASSERT_EQ(SubmitAllreduce(TensorName(d + "/" + ReduceOpName(op)), in, &out, {}, op, h),
                KOLO_SUCCESS)
          << LastError();
      ASSERT_EQ(WaitHandle(h, d), KOLO_SUCCESS) << kolo_handle_message(h.get());
      const Reference ref = AllreduceReference(AllRanksData(dtype, 1, size, kind, 77), op);
      EXPECT_MATCHES_REFERENCE(out.data(), ref);
      EXPECT_BUFFERS_EQUAL(in, original);
    }
    // Broadcast of a scalar from the last rank, in place.
    TypedBuffer b = RankUniqueData(dtype, 1, rank, DataKind::kWide, 78);
    Handle hb;
    ASSERT_EQ(SubmitBroadcast(TensorName(d + "/bc"), b, nullptr, {}, last, hb), KOLO_SUCCESS)
        << LastError();
    ASSERT_EQ(WaitHandle(hb, d), KOLO_SUCCESS) << kolo_handle_message(hb.get());
    EXPECT_BUFFERS_EQUAL(b, RankUniqueData(dtype, 1, last, DataKind::kWide, 78));
  }
}

}  // namespace
}  // namespace kolo_test
