// Tier 2: every kind of mismatch between ranks (shape, dtype, operation, reduce op, root, scale
// factors, all-gather trailing dimensions) completes the handle on EVERY rank with
// KOLO_ERR_INVALID_ARGUMENT and a message naming the tensor, the ranks and both values, leaves
// the output (and an in-place input) untouched, and the next operation, even under the same
// name, still works.
//
// In each case the last rank is the odd one out (rank 1 with 2 ranks, as in kolo.h's example),
// except where said otherwise; the message must name rank 0 and the odd rank.
#include <kolo/kolo.h>

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "test_util.h"

namespace kolo_test {
namespace {

int Last() { return WorldSize() - 1; }
bool IsOdd() { return WorldRank() == Last(); }

// True when `message` names rank `r` as "rank r" or in a list "ranks 1,2,r".
bool NamesRank(const std::string& message, int r) {
  const std::regex re("ranks? [0-9, and]*\\b" + std::to_string(r) + "\\b");
  return std::regex_search(message, re);
}

// Waits for a handle that must fail with a mismatch, and checks its message.
// `contains`: exact substrings; `contains_lower`: substrings of the lower-cased message.
void ExpectMismatch(Handle& h, const std::string& name, const std::vector<std::string>& contains,
                    const std::vector<std::string>& contains_lower, int odd_rank) {
  const kolo_status_t s = WaitHandle(h, name);
  if (s == KOLO_ERR_DEADLINE_EXCEEDED) return;  // reported by WaitHandle
  const std::string msg = kolo_handle_message(h.get());
  EXPECT_EQ(s, KOLO_ERR_INVALID_ARGUMENT)
      << "rank " << WorldRank() << ": '" << name << "' completed with " << kolo_status_string(s)
      << " (message: \"" << msg << "\")";
  EXPECT_NE(msg.find("'" + name + "'"), std::string::npos)
      << "the message does not name the tensor '" << name << "': \"" << msg << "\"";
  EXPECT_TRUE(NamesRank(msg, 0)) << "the message does not name rank 0: \"" << msg << "\"";
  EXPECT_TRUE(NamesRank(msg, odd_rank))
      << "the message does not name rank " << odd_rank << ": \"" << msg << "\"";
  for (const std::string& c : contains) {
    EXPECT_NE(msg.find(c), std::string::npos)
        << "the message lacks \"" << c << "\": \"" << msg << "\"";
  }
  const std::string lower = Lower(msg);
  for (const std::string& c : contains_lower) {
    EXPECT_NE(lower.find(c), std::string::npos)
        << "the message lacks \"" << c << "\" (any case): \"" << msg << "\"";
  }
  // The message is owned by the handle and stays the same until it is freed.
  EXPECT_EQ(msg, std::string(kolo_handle_message(h.get())));
}

// The next operation works, both under a fresh name and under the name that just failed.
void ExpectNextOpWorks(const std::string& failed_name) {
  const int rank = WorldRank(), size = WorldSize();
  for (const std::string& name : {TensorName("next"), failed_name}) {
    TypedBuffer in = RankUniqueData(KOLO_FLOAT32, 100, rank, DataKind::kWide, 7);
    TypedBuffer out(KOLO_FLOAT32, 100);
    Handle h;
    ASSERT_EQ(SubmitAllreduce(name, in, &out, {4, 25}, KOLO_OP_SUM, h), KOLO_SUCCESS)
        << "after a mismatch, submitting '" << name << "': " << LastError();
    ASSERT_EQ(WaitHandle(h, name), KOLO_SUCCESS)
        << "after a mismatch, '" << name << "': " << kolo_handle_message(h.get());
    EXPECT_MATCHES_REFERENCE(
        out.data(), AllreduceReference(AllRanksData(KOLO_FLOAT32, 100, size, DataKind::kWide, 7),
                                       KOLO_OP_SUM));
  }
}

// Buffers of one side of a mismatching all-reduce / broadcast: input kept, output sentinel.
struct Side {
  TypedBuffer input, input_copy, output, output_copy;
  Side(kolo_dtype_t dtype, int64_t count) {
    input = RankUniqueData(dtype, count, WorldRank(), DataKind::kWide, 3);
    input_copy = input;
    output = TypedBuffer(dtype, count);
    output.FillSentinel();
    output_copy = output;
  }
  void ExpectUntouched(const std::string& name) {
    EXPECT_BUFFERS_EQUAL(input, input_copy) << "'" << name << "' input changed by a failed op";
    EXPECT_BUFFERS_EQUAL(output, output_copy) << "'" << name << "' output written by a failed op";
  }
};

TEST(MismatchTest, ShapeAllreduce) {
  const std::string name = TensorName("grad/fc1");
  const std::vector<int64_t> shape = IsOdd() ? std::vector<int64_t>{4, 3} : std::vector<int64_t>{3, 4};
  Side side(KOLO_FLOAT32, 12);
  Handle h;
  ASSERT_EQ(SubmitAllreduce(name, side.input, &side.output, shape, KOLO_OP_SUM, h), KOLO_SUCCESS)
      << LastError();
  ExpectMismatch(h, name, {"shape", "[3,4]", "[4,3]"}, {"allreduce"}, Last());
  side.ExpectUntouched(name);
  ExpectNextOpWorks(name);
}

TEST(MismatchTest, ShapeAllreduceInPlaceRankZeroOdd) {
  // Here rank 0 is the odd one out, in place: the input must stay untouched everywhere.
  const std::string name = TensorName("w");
  const bool odd = WorldRank() == 0;
  const std::vector<int64_t> shape = odd ? std::vector<int64_t>{2, 6} : std::vector<int64_t>{6, 2};
  Side side(KOLO_FLOAT64, 12);
  Handle h;
  ASSERT_EQ(SubmitAllreduce(name, side.input, nullptr, shape, KOLO_OP_AVERAGE, h), KOLO_SUCCESS)
      << LastError();
  ExpectMismatch(h, name, {"shape", "[2,6]", "[6,2]"}, {}, 1);
  side.ExpectUntouched(name);
  ExpectNextOpWorks(name);
}

TEST(MismatchTest, NdimAllreduce) {
  const std::string name = TensorName("flat");
  const std::vector<int64_t> shape = IsOdd() ? std::vector<int64_t>{12} : std::vector<int64_t>{3, 4};
  Side side(KOLO_INT32, 12);
  Handle h;
  ASSERT_EQ(SubmitAllreduce(name, side.input, &side.output, shape, KOLO_OP_SUM, h), KOLO_SUCCESS)
      << LastError();
  ExpectMismatch(h, name, {"shape", "[3,4]", "[12]"}, {}, Last());
  side.ExpectUntouched(name);
  ExpectNextOpWorks(name);
}

TEST(MismatchTest, DtypeAllreduce) {
  const std::string name = TensorName("dtype");
  const kolo_dtype_t dtype = IsOdd() ? KOLO_INT32 : KOLO_FLOAT32;
  Side side(dtype, 12);
  Handle h;
  ASSERT_EQ(SubmitAllreduce(name, side.input, &side.output, {3, 4}, KOLO_OP_SUM, h), KOLO_SUCCESS)
      << LastError();
  ExpectMismatch(h, name, {"float32", "int32"}, {}, Last());
  side.ExpectUntouched(name);
  ExpectNextOpWorks(name);
}

TEST(MismatchTest, DtypeHalfVsDouble) {
  const std::string name = TensorName("dtype16");
  const kolo_dtype_t dtype = IsOdd() ? KOLO_FLOAT64 : KOLO_FLOAT16;
  Side side(dtype, 5);
  Handle h;
  ASSERT_EQ(SubmitAllreduce(name, side.input, &side.output, {5}, KOLO_OP_MAX, h), KOLO_SUCCESS)
      << LastError();
  ExpectMismatch(h, name, {"float16", "float64"}, {}, Last());
  side.ExpectUntouched(name);
  ExpectNextOpWorks(name);
}

TEST(MismatchTest, OperationAllreduceVsBroadcast) {
  const std::string name = TensorName("op");
  Side side(KOLO_FLOAT32, 12);
  Handle h;
  if (IsOdd()) {
    ASSERT_EQ(SubmitBroadcast(name, side.input, &side.output, {3, 4}, 0, h), KOLO_SUCCESS)
        << LastError();
  } else {
    ASSERT_EQ(SubmitAllreduce(name, side.input, &side.output, {3, 4}, KOLO_OP_SUM, h),
              KOLO_SUCCESS)
        << LastError();
  }
  ExpectMismatch(h, name, {}, {"allreduce", "broadcast"}, Last());
  side.ExpectUntouched(name);
  ExpectNextOpWorks(name);
}

TEST(MismatchTest, OperationAllreduceVsAllgather) {
  const std::string name = TensorName("op2");
  Side side(KOLO_FLOAT32, 12);
  Handle h;
  if (IsOdd()) {
    ASSERT_EQ(SubmitAllgather(name, side.input, {3, 4}, h), KOLO_SUCCESS) << LastError();
  } else {
    ASSERT_EQ(SubmitAllreduce(name, side.input, &side.output, {3, 4}, KOLO_OP_SUM, h),
              KOLO_SUCCESS)
        << LastError();
  }
  ExpectMismatch(h, name, {}, {"allreduce", "allgather"}, Last());
  if (IsOdd()) {
    const void* data = nullptr;
    int ndim = 0;
    int64_t shape[KOLO_MAX_DIMS];
    EXPECT_EQ(kolo_handle_output(h.get(), &data, &ndim, shape), KOLO_ERR_FAILED_PRECONDITION)
        << "kolo_handle_output on a failed all-gather";
  }
  side.ExpectUntouched(name);
  ExpectNextOpWorks(name);
}

TEST(MismatchTest, ReduceOp) {
  const std::string name = TensorName("reduce-op");
  Side side(KOLO_FLOAT32, 12);
  Handle h;
  ASSERT_EQ(SubmitAllreduce(name, side.input, &side.output, {12},
                            IsOdd() ? KOLO_OP_MAX : KOLO_OP_SUM, h),
            KOLO_SUCCESS)
      << LastError();
  ExpectMismatch(h, name, {}, {"sum", "max"}, Last());
  side.ExpectUntouched(name);
  ExpectNextOpWorks(name);
}

TEST(MismatchTest, BroadcastRoot) {
  const std::string name = TensorName("root");
  Side side(KOLO_INT8, 9);
  Handle h;
  ASSERT_EQ(SubmitBroadcast(name, side.input, &side.output, {9}, IsOdd() ? Last() : 0, h),
            KOLO_SUCCESS)
      << LastError();
  ExpectMismatch(h, name, {}, {"root"}, Last());
  side.ExpectUntouched(name);
  ExpectNextOpWorks(name);
}

TEST(MismatchTest, BroadcastShape) {
  const std::string name = TensorName("bshape");
  const int64_t n = IsOdd() ? 6 : 5;
  Side side(KOLO_UINT16, n);
  Handle h;
  ASSERT_EQ(SubmitBroadcast(name, side.input, nullptr, {n}, 0, h), KOLO_SUCCESS) << LastError();
  ExpectMismatch(h, name, {"shape", "[5]", "[6]"}, {"broadcast"}, Last());
  side.ExpectUntouched(name);
  ExpectNextOpWorks(name);
}

TEST(MismatchTest, Prescale) {
  const std::string name = TensorName("prescale");
  Side side(KOLO_FLOAT32, 12);
  Handle h;
  ASSERT_EQ(SubmitAllreduce(name, side.input, &side.output, {12}, KOLO_OP_SUM, h,
                            IsOdd() ? 1.5 : 1.0, 1.0),
            KOLO_SUCCESS)
      << LastError();
  ExpectMismatch(h, name, {"1.5"}, {"scale"}, Last());
  side.ExpectUntouched(name);
  ExpectNextOpWorks(name);
}

TEST(MismatchTest, Postscale) {
  const std::string name = TensorName("postscale");
  Side side(KOLO_FLOAT64, 12);
  Handle h;
  ASSERT_EQ(SubmitAllreduce(name, side.input, &side.output, {12}, KOLO_OP_AVERAGE, h, 1.0,
                            IsOdd() ? 0.25 : 1.0),
            KOLO_SUCCESS)
      << LastError();
  ExpectMismatch(h, name, {"0.25"}, {"scale"}, Last());
  side.ExpectUntouched(name);
  ExpectNextOpWorks(name);
}

TEST(MismatchTest, AllgatherTrailingDims) {
  const std::string name = TensorName("gather");
  const std::vector<int64_t> shape = IsOdd() ? std::vector<int64_t>{2, 4} : std::vector<int64_t>{2, 3};
  TypedBuffer in = RankUniqueData(KOLO_FLOAT32, NumElements(shape), WorldRank(), DataKind::kWide, 5);
  const TypedBuffer copy = in;
  Handle h;
  ASSERT_EQ(SubmitAllgather(name, in, shape, h), KOLO_SUCCESS) << LastError();
  ExpectMismatch(h, name, {"shape", "[2,3]", "[2,4]"}, {"allgather"}, Last());
  const void* data = nullptr;
  int ndim = 0;
  int64_t out_shape[KOLO_MAX_DIMS];
  EXPECT_EQ(kolo_handle_output(h.get(), &data, &ndim, out_shape), KOLO_ERR_FAILED_PRECONDITION)
      << "kolo_handle_output on a failed all-gather";
  EXPECT_BUFFERS_EQUAL(in, copy);
  ExpectNextOpWorks(name);
}

TEST(MismatchTest, AllgatherDtype) {
  const std::string name = TensorName("gather-dtype");
  const kolo_dtype_t dtype = IsOdd() ? KOLO_INT64 : KOLO_FLOAT64;
  // First dimension different per rank (legal); the dtype is the mismatch.
  TypedBuffer in = RankUniqueData(dtype, (WorldRank() + 1) * 2, WorldRank(), DataKind::kWide, 6);
  Handle h;
  ASSERT_EQ(SubmitAllgather(name, in, {WorldRank() + 1, 2}, h), KOLO_SUCCESS) << LastError();
  ExpectMismatch(h, name, {"float64", "int64"}, {}, Last());
  ExpectNextOpWorks(name);
}

// Several mismatching names and valid ones in the same cycle: each mismatch fails on its own,
// the valid operations around them complete correctly.
TEST(MismatchTest, MismatchesAmongValidOps) {
  const int rank = WorldRank(), size = WorldSize();
  struct Valid {
    std::string name;
    TypedBuffer in, out;
    Handle h;
  };
  std::vector<std::unique_ptr<Valid>> valid;
  std::vector<std::unique_ptr<Side>> sides;
  std::vector<std::pair<std::string, std::unique_ptr<Handle>>> bad;
  for (int k = 0; k < 6; ++k) {
    auto v = std::make_unique<Valid>();
    v->name = TensorName("valid" + std::to_string(k));
    v->in = RankUniqueData(KOLO_FLOAT32, 64 + k, rank, DataKind::kWide, 100 + k);
    v->out = TypedBuffer(KOLO_FLOAT32, 64 + k);
    ASSERT_EQ(SubmitAllreduce(v->name, v->in, &v->out, {64 + k}, KOLO_OP_SUM, v->h), KOLO_SUCCESS)
        << LastError();
    valid.push_back(std::move(v));
    if (k % 2 == 0) {
      const std::string name = TensorName("bad" + std::to_string(k));
      auto side = std::make_unique<Side>(KOLO_FLOAT32, 12);
      auto h = std::make_unique<Handle>();
      const std::vector<int64_t> shape =
          IsOdd() ? std::vector<int64_t>{4, 3} : std::vector<int64_t>{3, 4};
      ASSERT_EQ(SubmitAllreduce(name, side->input, &side->output, shape, KOLO_OP_SUM, *h),
                KOLO_SUCCESS)
          << LastError();
      sides.push_back(std::move(side));
      bad.emplace_back(name, std::move(h));
    }
  }
  for (auto& [name, h] : bad) ExpectMismatch(*h, name, {"shape", "[3,4]", "[4,3]"}, {}, Last());
  for (auto& side : sides) side->ExpectUntouched("bad");
  for (size_t k = 0; k < valid.size(); ++k) {
    Valid& v = *valid[k];
    ASSERT_EQ(WaitHandle(v.h, v.name), KOLO_SUCCESS) << kolo_handle_message(v.h.get());
    EXPECT_MATCHES_REFERENCE(
        v.out.data(), AllreduceReference(AllRanksData(KOLO_FLOAT32, 64 + static_cast<int64_t>(k),
                                                      size, DataKind::kWide, 100 + k),
                                         KOLO_OP_SUM));
  }
}


// Arguments the C API itself refuses (an unknown dtype or reduce op, an ndim out of range, a
// grouped member with a bad dtype), on the last rank only: that rank's caller gets the error
// at once, and the peers' same names fail naming it within the test's deadline — announced as
// refusals like any other submission kolo refuses — instead of waiting for it forever.
TEST(MismatchTest, ArgumentsRefusedByTheCApiFailThePeers) {
  const int64_t count = 8;
  const int64_t shape[1] = {count};
  std::vector<float> data(count, 1.0f), out(count);
  struct Case {
    const char* suffix;
    std::function<kolo_status_t(const std::string&, kolo_handle_t*)> bad;
  };
  const std::vector<Case> cases = {
      {"dtype",
       [&](const std::string& n, kolo_handle_t* h) {
         return kolo_allreduce_async(n.c_str(), data.data(), out.data(),
                                     static_cast<kolo_dtype_t>(99), 1, shape, KOLO_OP_SUM, 1.0,
                                     1.0, h);
       }},
      {"reduce-op",
       [&](const std::string& n, kolo_handle_t* h) {
         return kolo_allreduce_async(n.c_str(), data.data(), out.data(), KOLO_FLOAT32, 1, shape,
                                     static_cast<kolo_reduce_op_t>(77), 1.0, 1.0, h);
       }},
      {"ndim",
       [&](const std::string& n, kolo_handle_t* h) {
         return kolo_allreduce_async(n.c_str(), data.data(), out.data(), KOLO_FLOAT32, -1, shape,
                                     KOLO_OP_SUM, 1.0, 1.0, h);
       }},
  };
  for (const Case& c : cases) {
    const std::string name = TensorName(c.suffix);
    Handle h;
    if (IsOdd()) {
      EXPECT_EQ(c.bad(name, h.out()), KOLO_ERR_INVALID_ARGUMENT) << c.suffix;
    } else {
      ASSERT_EQ(kolo_allreduce_async(name.c_str(), data.data(), out.data(), KOLO_FLOAT32, 1,
                                     shape, KOLO_OP_SUM, 1.0, 1.0, h.out()),
                KOLO_SUCCESS) << LastError();
      const kolo_status_t s = WaitHandle(h, name);
      EXPECT_EQ(s, KOLO_ERR_INVALID_ARGUMENT) << kolo_handle_message(h.get());
      EXPECT_NE(std::string(kolo_handle_message(h.get())).find(
                    "rank " + std::to_string(Last()) + " refused it"),
                std::string::npos) << kolo_handle_message(h.get());
    }
  }
  // A group whose second member has an unknown dtype on the last rank: the whole group fails on
  // the others.
  const std::string ga = TensorName("group-a"), gb = TensorName("group-b");
  const char* names[2] = {ga.c_str(), gb.c_str()};
  std::vector<float> a(count, 1.0f), b(count, 2.0f);
  const void* inputs[2] = {a.data(), b.data()};
  void* outputs[2] = {a.data(), b.data()};
  const kolo_dtype_t unknown = static_cast<kolo_dtype_t>(99);
  kolo_dtype_t dtypes[2] = {KOLO_FLOAT32, IsOdd() ? unknown : KOLO_FLOAT32};
  const int ndims[2] = {1, 1};
  const int64_t* shapes[2] = {shape, shape};
  kolo_handle_t handles[2] = {nullptr, nullptr};
  const kolo_status_t s = kolo_grouped_allreduce_async_on(0, 2, names, inputs, outputs, dtypes,
                                                          ndims, shapes, KOLO_OP_SUM, 1.0, 1.0,
                                                          handles);
  if (IsOdd()) {
    EXPECT_EQ(s, KOLO_ERR_INVALID_ARGUMENT);
  } else {
    ASSERT_EQ(s, KOLO_SUCCESS) << LastError();
    for (kolo_handle_t raw : handles) {
      Handle h;
      *h.out() = raw;
      EXPECT_EQ(WaitHandle(h, "group member"), KOLO_ERR_INVALID_ARGUMENT)
          << kolo_handle_message(h.get());
    }
  }
  WorldBarrier();
  ExpectNextOpWorks(TensorName("dtype"));
}

}  // namespace
}  // namespace kolo_test
