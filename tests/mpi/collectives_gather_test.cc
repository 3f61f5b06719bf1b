// Tier 2: all-gather, broadcast and operation names through the C API under mpirun, against
// references computed locally from every rank's known inputs (test_util), never with kolo:
//  - all-gather: first dimension different per rank (including 0 rows on one rank), 1-3 dims;
//  - broadcast: from the last rank and from every root, in-place and out-of-place;
//  - name reuse after completion, a name still in flight refused while the first op completes;
//  - the C API's helpers (status strings, dtype sizes) and the tests' float converters.
#include <kolo/kolo.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "collectives_params.h"
#include "test_util.h"

namespace kolo_test {
namespace {

// ---- all-gather ---------------------------------------------------------------------------------

struct GatherLayout {
  const char* label;
  std::vector<int64_t> trailing;
  int64_t (*rows)(int rank, int size);
};

class CollectivesAllgather : public ::testing::TestWithParam<kolo_dtype_t> {};

TEST_P(CollectivesAllgather, FirstDimensionDiffersPerRank) {
  const kolo_dtype_t dtype = GetParam();
  const int rank = WorldRank(), size = WorldSize();
  const std::vector<GatherLayout> layouts = {
      {"rank-plus-one", {3}, [](int r, int) -> int64_t { return r + 1; }},
      {"rank1-empty-1d", {}, [](int r, int) -> int64_t { return r == 1 ? 0 : 2 * r + 1; }},
      {"last-empty-3d", {2, 5}, [](int r, int s) -> int64_t { return r == s - 1 ? 0 : 100 + r; }},
      {"large", {10}, [](int r, int) -> int64_t { return 7000 + 1000 * r; }},
      {"one-row-each", {7}, [](int, int) -> int64_t { return 1; }},
  };
  struct Item {
    std::string name;
    std::vector<int64_t> shape;
    TypedBuffer input, original;
    Handle handle;
    bool submitted = false;
  };
  std::vector<std::unique_ptr<Item>> items;
  uint64_t seed = 500;
  for (const GatherLayout& layout : layouts) {
    auto item = std::make_unique<Item>();
    item->name = TensorName(layout.label);
    const int64_t inner = NumElements(layout.trailing);
    item->shape = {layout.rows(rank, size)};
    item->shape.insert(item->shape.end(), layout.trailing.begin(), layout.trailing.end());
    item->input = RankUniqueData(dtype, item->shape[0] * inner, rank, DataKind::kWide, seed++);
    item->original = item->input;
    const kolo_status_t s = SubmitAllgather(item->name, item->input, item->shape, item->handle);
    EXPECT_EQ(s, KOLO_SUCCESS) << item->name << ": " << LastError();
    item->submitted = s == KOLO_SUCCESS;
    items.push_back(std::move(item));
  }
  seed = 500;
  for (size_t k = 0; k < items.size(); ++k, ++seed) {
    Item& item = *items[k];
    const GatherLayout& layout = layouts[k];
    if (!item.submitted) continue;
    ASSERT_EQ(WaitHandle(item.handle, item.name), KOLO_SUCCESS)
        << item.name << ": " << kolo_handle_message(item.handle.get());
    const int64_t inner = NumElements(layout.trailing);
    int64_t total_rows = 0;
    std::vector<TypedBuffer> parts;
    for (int r = 0; r < size; ++r) {
      const int64_t rows = layout.rows(r, size);
      total_rows += rows;
      parts.push_back(RankUniqueData(dtype, rows * inner, r, DataKind::kWide, seed));
    }
    TypedBuffer want(dtype, total_rows * inner);
    size_t offset = 0;
    for (const TypedBuffer& p : parts) {
      if (p.nbytes()) std::memcpy(want.bytes.data() + offset, p.bytes.data(), p.nbytes());
      offset += p.nbytes();
    }
    const void* data = nullptr;
    int ndim = -1;
    int64_t out_shape[KOLO_MAX_DIMS] = {0};
    ASSERT_EQ(kolo_handle_output(item.handle.get(), &data, &ndim, out_shape), KOLO_SUCCESS)
        << item.name;
    ASSERT_EQ(ndim, static_cast<int>(item.shape.size())) << item.name;
    EXPECT_EQ(out_shape[0], total_rows) << item.name;
    for (int d = 1; d < ndim; ++d) EXPECT_EQ(out_shape[d], item.shape[d]) << item.name << " dim " << d;
    if (total_rows * inner > 0) {
      ASSERT_NE(data, nullptr) << item.name;
      EXPECT_TRUE(BytesEqual(data, want)) << item.name;
    }
    EXPECT_BUFFERS_EQUAL(item.input, item.original) << item.name << ": input modified";
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CollectivesAllgather, ::testing::ValuesIn(AllDtypes()),
                         DtypeParamName);

TEST(CollectivesAllgatherOutput, NotAnAllgatherIsFailedPrecondition) {
  TypedBuffer in = RankUniqueData(KOLO_FLOAT32, 8, WorldRank(), DataKind::kWide);
  TypedBuffer out(KOLO_FLOAT32, 8);
  Handle h;
  ASSERT_EQ(SubmitAllreduce(TensorName("ar"), in, &out, {8}, KOLO_OP_SUM, h), KOLO_SUCCESS)
      << LastError();
  ASSERT_EQ(WaitHandle(h, "ar"), KOLO_SUCCESS) << kolo_handle_message(h.get());
  const void* data = nullptr;
  int ndim = -1;
  int64_t shape[KOLO_MAX_DIMS] = {0};
  EXPECT_EQ(kolo_handle_output(h.get(), &data, &ndim, shape), KOLO_ERR_FAILED_PRECONDITION);
}

// ---- broadcast ----------------------------------------------------------------------------------

class CollectivesBroadcast : public ::testing::TestWithParam<kolo_dtype_t> {};

TEST_P(CollectivesBroadcast, FromLastRank) {
  const kolo_dtype_t dtype = GetParam();
  const int rank = WorldRank(), root = WorldSize() - 1;
  struct Item {
    std::string name;
    int64_t count;
    bool in_place;
    uint64_t seed;
    TypedBuffer input, original, output;
    Handle handle;
    bool submitted = false;
  };
  std::vector<std::unique_ptr<Item>> items;
  for (int64_t count : {1, 1000, 70000}) {
    for (bool in_place : {false, true}) {
      auto item = std::make_unique<Item>();
      item->name = TensorName(std::to_string(count) + (in_place ? "/inplace" : ""));
      item->count = count;
      item->in_place = in_place;
      item->seed = static_cast<uint64_t>(count) * 2 + in_place;
      item->input = RankUniqueData(dtype, count, rank, DataKind::kWide, item->seed);
      item->original = item->input;
      if (!in_place) {
        item->output = TypedBuffer(dtype, count);
        item->output.FillSentinel();
      }
      const kolo_status_t s =
          SubmitBroadcast(item->name, item->input, in_place ? nullptr : &item->output,
                          ShapeFor(count), root, item->handle);
      EXPECT_EQ(s, KOLO_SUCCESS) << item->name << ": " << LastError();
      item->submitted = s == KOLO_SUCCESS;
      items.push_back(std::move(item));
    }
  }
  for (auto& item : items) {
    if (!item->submitted) continue;
    ASSERT_EQ(WaitHandle(item->handle, item->name), KOLO_SUCCESS)
        << item->name << ": " << kolo_handle_message(item->handle.get());
    const TypedBuffer want = RankUniqueData(dtype, item->count, root, DataKind::kWide, item->seed);
    EXPECT_BUFFERS_EQUAL(item->in_place ? item->input : item->output, want) << item->name;
    if (!item->in_place) {
      EXPECT_BUFFERS_EQUAL(item->input, item->original) << item->name << ": input modified";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CollectivesBroadcast, ::testing::ValuesIn(AllDtypes()),
                         DtypeParamName);

TEST(CollectivesBroadcastRoots, EveryRoot) {
  const int rank = WorldRank(), size = WorldSize();
  struct Item {
    std::string name;
    int root;
    kolo_dtype_t dtype;
    bool in_place;
    TypedBuffer input, original, output;
    Handle handle;
    bool submitted = false;
  };
  std::vector<std::unique_ptr<Item>> items;
  // All roots in flight at once.
  for (kolo_dtype_t dtype : {KOLO_FLOAT64, KOLO_INT8, KOLO_FLOAT16}) {
    for (int root = 0; root < size; ++root) {
      for (bool in_place : {false, true}) {
        auto item = std::make_unique<Item>();
        item->name = TensorName(std::string(DtypeName(dtype)) + "/root" + std::to_string(root) +
                                (in_place ? "/inplace" : ""));
        item->root = root;
        item->dtype = dtype;
        item->in_place = in_place;
        item->input = RankUniqueData(dtype, 1000, rank, DataKind::kWide, 900 + root);
        item->original = item->input;
        if (!in_place) {
          item->output = TypedBuffer(dtype, 1000);
          item->output.FillSentinel();
        }
        const kolo_status_t s =
            SubmitBroadcast(item->name, item->input, in_place ? nullptr : &item->output, {1000},
                            root, item->handle);
        EXPECT_EQ(s, KOLO_SUCCESS) << item->name << ": " << LastError();
        item->submitted = s == KOLO_SUCCESS;
        items.push_back(std::move(item));
      }
    }
  }
  for (auto& item : items) {
    if (!item->submitted) continue;
    ASSERT_EQ(WaitHandle(item->handle, item->name), KOLO_SUCCESS)
        << item->name << ": " << kolo_handle_message(item->handle.get());
    const TypedBuffer want =
        RankUniqueData(item->dtype, 1000, item->root, DataKind::kWide, 900 + item->root);
    EXPECT_BUFFERS_EQUAL(item->in_place ? item->input : item->output, want) << item->name;
    if (!item->in_place) {
      EXPECT_BUFFERS_EQUAL(item->input, item->original) << item->name;
    }
  }
}

// ---- names --------------------------------------------------------------------------------------

TEST(CollectivesNames, ReuseAfterCompletion) {
  const int rank = WorldRank(), size = WorldSize();
  const std::string name = TensorName("reused");
  // The same name three times in a row (as a training loop does), data different each time.
  for (uint64_t iter = 0; iter < 3; ++iter) {
    SCOPED_TRACE("iteration " + std::to_string(iter));
    TypedBuffer in = RankUniqueData(KOLO_FLOAT32, 1000, rank, DataKind::kWide, 40 + iter);
    TypedBuffer out(KOLO_FLOAT32, 1000);
    Handle h;
    ASSERT_EQ(SubmitAllreduce(name, in, &out, {1000}, KOLO_OP_SUM, h), KOLO_SUCCESS)
        << LastError();
    ASSERT_EQ(WaitHandle(h, name), KOLO_SUCCESS) << kolo_handle_message(h.get());
    EXPECT_MATCHES_REFERENCE(
        out.data(),
        AllreduceReference(AllRanksData(KOLO_FLOAT32, 1000, size, DataKind::kWide, 40 + iter),
                           KOLO_OP_SUM));
  }
  // Same name, different shape and dtype, after completion: not a mismatch.
  {
    TypedBuffer in = RankUniqueData(KOLO_INT32, 21, rank, DataKind::kWide, 50);
    Handle h;
    ASSERT_EQ(SubmitAllreduce(name, in, nullptr, {3, 7}, KOLO_OP_MAX, h), KOLO_SUCCESS)
        << LastError();
    ASSERT_EQ(WaitHandle(h, name), KOLO_SUCCESS) << kolo_handle_message(h.get());
    EXPECT_MATCHES_REFERENCE(
        in.data(), AllreduceReference(AllRanksData(KOLO_INT32, 21, size, DataKind::kWide, 50),
                                      KOLO_OP_MAX));
  }
  // Same name as a broadcast, then as an all-gather.
  {
    TypedBuffer in = RankUniqueData(KOLO_FLOAT64, 33, rank, DataKind::kWide, 51);
    TypedBuffer out(KOLO_FLOAT64, 33);
    Handle h;
    ASSERT_EQ(SubmitBroadcast(name, in, &out, {33}, 0, h), KOLO_SUCCESS) << LastError();
    ASSERT_EQ(WaitHandle(h, name), KOLO_SUCCESS) << kolo_handle_message(h.get());
    EXPECT_BUFFERS_EQUAL(out, RankUniqueData(KOLO_FLOAT64, 33, 0, DataKind::kWide, 51));
  }
  {
    TypedBuffer in = RankUniqueData(KOLO_INT16, 4, rank, DataKind::kWide, 52);
    Handle h;
    ASSERT_EQ(SubmitAllgather(name, in, {2, 2}, h), KOLO_SUCCESS) << LastError();
    ASSERT_EQ(WaitHandle(h, name), KOLO_SUCCESS) << kolo_handle_message(h.get());
    const void* data = nullptr;
    int ndim = 0;
    int64_t shape[KOLO_MAX_DIMS] = {0};
    ASSERT_EQ(kolo_handle_output(h.get(), &data, &ndim, shape), KOLO_SUCCESS);
    ASSERT_EQ(ndim, 2);
    EXPECT_EQ(shape[0], 2 * size);
    TypedBuffer want(KOLO_INT16, 4 * size);
    for (int r = 0; r < size; ++r) {
      const TypedBuffer part = RankUniqueData(KOLO_INT16, 4, r, DataKind::kWide, 52);
      std::memcpy(want.bytes.data() + r * part.nbytes(), part.bytes.data(), part.nbytes());
    }
    EXPECT_TRUE(BytesEqual(data, want));
  }
}

// A name still in flight on this rank is refused at submission (for every kind of operation);
// the first operation is unaffected and completes with the right result. Each rank's first
// submission is guaranteed to be still pending when it resubmits: x is held back by the last
// rank, y by the others, until a barrier.
TEST(CollectivesNames, InFlightNameRefusedAtSubmission) {
  const int rank = WorldRank(), size = WorldSize(), last = size - 1;
  const std::string x = TensorName("x"), y = TensorName("y"), g = TensorName("g");
  TypedBuffer in_x = RankUniqueData(KOLO_FLOAT32, 1000, rank, DataKind::kWide, 61);
  TypedBuffer in_y = RankUniqueData(KOLO_INT64, 100, rank, DataKind::kWide, 62);
  TypedBuffer in_g = RankUniqueData(KOLO_UINT8, 6, rank, DataKind::kWide, 63);
  const TypedBuffer orig_x = in_x;
  TypedBuffer out_x(KOLO_FLOAT32, 1000), out_y(KOLO_INT64, 100);
  out_x.FillSentinel();
  out_y.FillSentinel();
  TypedBuffer dup_in = RankUniqueData(KOLO_FLOAT32, 1000, rank, DataKind::kWide, 64);
  const TypedBuffer dup_orig = dup_in;
  TypedBuffer dup_out(KOLO_FLOAT32, 1000);
  dup_out.FillSentinel();
  const TypedBuffer dup_sentinel = dup_out;
  Handle hx, hy, hg;

  auto expect_refused = [&](const std::string& name) {
    Handle d1, d2, d3, d4;
    EXPECT_EQ(SubmitAllreduce(name, dup_in, &dup_out, {1000}, KOLO_OP_SUM, d1),
              KOLO_ERR_INVALID_ARGUMENT)
        << "allreduce resubmitting in-flight '" << name << "'";
    EXPECT_STRNE(kolo_last_error(), "");
    EXPECT_EQ(SubmitAllreduce(name, dup_in, nullptr, {1000}, KOLO_OP_SUM, d2),
              KOLO_ERR_INVALID_ARGUMENT)
        << "in-place allreduce resubmitting in-flight '" << name << "'";
    EXPECT_EQ(SubmitBroadcast(name, dup_in, &dup_out, {1000}, 0, d3), KOLO_ERR_INVALID_ARGUMENT)
        << "broadcast resubmitting in-flight '" << name << "'";
    EXPECT_EQ(SubmitAllgather(name, dup_in, {1000}, d4), KOLO_ERR_INVALID_ARGUMENT)
        << "allgather resubmitting in-flight '" << name << "'";
  };
  auto expect_pending = [&](Handle& h, const std::string& name) {
    EXPECT_EQ(kolo_poll(h.get()), 0) << name;
    EXPECT_EQ(kolo_handle_status(h.get()), KOLO_ERR_UNKNOWN) << name << " pending";
    EXPECT_STREQ(kolo_handle_message(h.get()), "") << name << " pending";
  };

  // Phase 1: the first submission, then the duplicates while it cannot complete yet.
  if (rank != last) {
    ASSERT_EQ(SubmitAllreduce(x, in_x, &out_x, {1000}, KOLO_OP_SUM, hx), KOLO_SUCCESS)
        << LastError();
    ASSERT_EQ(SubmitAllgather(g, in_g, {3, 2}, hg), KOLO_SUCCESS) << LastError();
    expect_refused(x);
    expect_refused(g);
    expect_pending(hx, x);
    expect_pending(hg, g);
    const void* data = nullptr;
    int ndim = 0;
    int64_t shape[KOLO_MAX_DIMS];
    EXPECT_EQ(kolo_handle_output(hg.get(), &data, &ndim, shape), KOLO_ERR_FAILED_PRECONDITION)
        << "kolo_handle_output on a pending all-gather";
  } else {
    ASSERT_EQ(SubmitAllreduce(y, in_y, &out_y, {100}, KOLO_OP_MIN, hy), KOLO_SUCCESS)
        << LastError();
    expect_refused(y);
    expect_pending(hy, y);
  }
  WorldBarrier();
  // Phase 2: the remaining submissions, which let both complete.
  if (rank != last) {
    ASSERT_EQ(SubmitAllreduce(y, in_y, &out_y, {100}, KOLO_OP_MIN, hy), KOLO_SUCCESS)
        << LastError();
  } else {
    ASSERT_EQ(SubmitAllreduce(x, in_x, &out_x, {1000}, KOLO_OP_SUM, hx), KOLO_SUCCESS)
        << LastError();
    ASSERT_EQ(SubmitAllgather(g, in_g, {3, 2}, hg), KOLO_SUCCESS) << LastError();
  }
  ASSERT_EQ(WaitHandle(hx, x), KOLO_SUCCESS) << kolo_handle_message(hx.get());
  ASSERT_EQ(WaitHandle(hy, y), KOLO_SUCCESS) << kolo_handle_message(hy.get());
  ASSERT_EQ(WaitHandle(hg, g), KOLO_SUCCESS) << kolo_handle_message(hg.get());
  EXPECT_MATCHES_REFERENCE(
      out_x.data(), AllreduceReference(AllRanksData(KOLO_FLOAT32, 1000, size, DataKind::kWide, 61),
                                       KOLO_OP_SUM));
  EXPECT_MATCHES_REFERENCE(
      out_y.data(), AllreduceReference(AllRanksData(KOLO_INT64, 100, size, DataKind::kWide, 62),
                                       KOLO_OP_MIN));
  EXPECT_BUFFERS_EQUAL(in_x, orig_x);
  EXPECT_BUFFERS_EQUAL(dup_in, dup_orig) << "a refused submission modified its input";
  EXPECT_BUFFERS_EQUAL(dup_out, dup_sentinel) << "a refused submission wrote its output";
  // After completion the names are free again.
  Handle again;
  ASSERT_EQ(SubmitAllreduce(x, in_x, &out_x, {1000}, KOLO_OP_SUM, again), KOLO_SUCCESS)
      << LastError();
  EXPECT_EQ(WaitHandle(again, x), KOLO_SUCCESS) << kolo_handle_message(again.get());
}

// ---- helpers of the C API -----------------------------------------------------------------------

TEST(CollectivesHelpers, StatusStringsAndDtypeSizes) {
  ASSERT_NE(kolo_status_string(KOLO_SUCCESS), nullptr);
  EXPECT_STRNE(kolo_status_string(KOLO_SUCCESS), "");
  EXPECT_STREQ(kolo_status_string(KOLO_ERR_INVALID_ARGUMENT), "INVALID_ARGUMENT");
  EXPECT_STREQ(kolo_status_string(KOLO_ERR_FAILED_PRECONDITION), "FAILED_PRECONDITION");
  EXPECT_STREQ(kolo_status_string(KOLO_ERR_UNIMPLEMENTED), "UNIMPLEMENTED");
  for (kolo_dtype_t dtype : AllDtypes()) {
    EXPECT_EQ(kolo_dtype_size(dtype), DtypeBytes(dtype)) << DtypeName(dtype);
  }
  EXPECT_EQ(kolo_dtype_size(static_cast<kolo_dtype_t>(11)), 0u);
  EXPECT_EQ(kolo_dtype_size(static_cast<kolo_dtype_t>(-1)), 0u);
}

// The test's own 16-bit converters, checked against known encodings and against the compiler's
// float conversion (same algorithm with float32's parameters), so the references can be trusted.
TEST(CollectivesTestUtil, FloatConvertersRoundToNearestEven) {
  EXPECT_EQ(DoubleToHalf(1.0), 0x3c00);
  EXPECT_EQ(DoubleToHalf(-2.0), 0xc000);
  EXPECT_EQ(DoubleToHalf(65504.0), 0x7bff);
  EXPECT_EQ(DoubleToHalf(65519.99), 0x7bff);
  EXPECT_EQ(DoubleToHalf(65520.0), 0x7c00);  // tie at the top rounds to infinity (even)
  EXPECT_EQ(DoubleToHalf(2049.0), 0x6800);   // tie -> 2048 (even)
  EXPECT_EQ(DoubleToHalf(2051.0), 0x6802);   // tie -> 2052 (even)
  EXPECT_EQ(DoubleToHalf(2049.5), 0x6801);   // above the tie -> 2050
  EXPECT_EQ(DoubleToHalf(std::ldexp(1.0, -24)), 0x0001);     // smallest subnormal
  EXPECT_EQ(DoubleToHalf(std::ldexp(1.0, -25)), 0x0000);     // tie -> 0 (even)
  EXPECT_EQ(DoubleToHalf(std::ldexp(3.0, -25)), 0x0002);     // tie -> 2 (even)
  EXPECT_EQ(DoubleToHalf(std::ldexp(1023.5, -24)), 0x0400);  // rounds up into the normals
  // 0x3555: exponent field 13 (2^-2), mantissa 0x155 = 341: (1024 + 341) / 1024 * 2^-2, the
  // half nearest 1/3.
  EXPECT_EQ(HalfToDouble(0x3555), std::ldexp(1024.0 + 0x155, -2 - 10));
  EXPECT_EQ(HalfToDouble(0x0001), std::ldexp(1.0, -24));  // 1 x 2^-14 / 1024: smallest subnormal
  EXPECT_EQ(DoubleToBfloat16(1.0), 0x3f80);
  EXPECT_EQ(DoubleToBfloat16(257.0), 0x4380);  // tie -> 256 (even)
  EXPECT_EQ(DoubleToBfloat16(259.0), 0x4382);  // tie -> 260 (even)
  // 0x4049: exponent field 128 (2^1), mantissa 0x49 = 73: (128 + 73) / 128 * 2, the bfloat16
  // nearest pi.
  EXPECT_EQ(Bfloat16ToDouble(0x4049), std::ldexp(128.0 + 0x49, 1 - 7));
  uint64_t x = 12345;
  for (int i = 0; i < 20000; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const double d = std::ldexp(static_cast<double>(x >> 11), -53 + static_cast<int>((x >> 3) % 80) - 40) *
                     ((x & 1) ? -1 : 1);
    const float f = static_cast<float>(d);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    ASSERT_EQ(EncodeBinaryFloat(d, 8, 23), bits) << d;
    ASSERT_EQ(DecodeBinaryFloat(bits, 8, 23), static_cast<double>(f)) << d;
    // Round trip through half for every finite half the value rounds to (infinities and NaN
    // are left out: they do not round-trip to the same bits by value).
    const uint16_t h = DoubleToHalf(d);
    if ((h & 0x7c00) != 0x7c00) {
      ASSERT_EQ(DoubleToHalf(HalfToDouble(h)), h);
    }
  }
}

}  // namespace
}  // namespace kolo_test
