// reducescatter, alltoall and barrier through the whole runtime on N Runtimes in one process
// (loopback transport), checked against references computed from every rank's known inputs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "runtime/operations.h"
#include "runtime/wire/wire.h"
#include "tests/harness/submission.h"
#include "unit/thread_world.h"
#include "unit/typed_data.h"

namespace kolo {
namespace {

using testing::Load;
using testing::Reference;
using testing::RunRuntimes;
using testing::Store;
using testing::Tolerance;
using testing::Value;
using testing::WaitFor;

using testing::FastConfig;

Submission Reducescatter(const std::string& name, const void* in, DataType t,
                         std::vector<int64_t> shape, ReduceOp op) {
  Submission s = testing::MakeSubmission(OpType::kReducescatter, name, in, nullptr, t,
                                         std::move(shape));
  s.reduce_op = op;
  return s;
}

Submission Alltoall(const std::string& name, const void* in, DataType t,
                    std::vector<int64_t> shape, std::vector<int64_t> splits) {
  Submission s = testing::MakeSubmission(OpType::kAlltoall, name, in, nullptr, t,
                                         std::move(shape));
  s.splits = std::move(splits);
  return s;
}

TEST(RuntimeOps, NewOpsAndSplitsCrossTheWire) {
  RequestList reqs;
  Request q;
  q.op = OpType::kAlltoall;
  q.name = "a";
  q.shape = {5, 2};
  q.splits = {2, 0, 3};
  reqs.requests = {q};
  auto back = DecodeRequestList(EncodeRequestList(reqs));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->requests[0].op, OpType::kAlltoall);
  EXPECT_EQ(back->requests[0].splits, q.splits);
  ResponseList resps;
  Response r;
  r.type = ResponseType::kBarrier;
  r.names = {"__kolo_barrier.0"};
  Response a;
  a.type = ResponseType::kAlltoall;
  a.names = {"a"};
  a.splits = {1, 2, 3, 4};
  resps.responses = {r, a};
  auto rback = DecodeResponseList(EncodeResponseList(resps));
  ASSERT_TRUE(rback.ok()) << rback.status().ToString();
  EXPECT_EQ(rback->responses[0].type, ResponseType::kBarrier);
  EXPECT_EQ(rback->responses[1].type, ResponseType::kAlltoall);
  EXPECT_EQ(rback->responses[1].splits, a.splits);
}

TEST(RuntimeOps, ReducescatterShareIsHorovodsRule) {
  // 10 rows over 4 ranks: 3, 3, 2, 2 (the first 10 % 4 ranks get one more).
  EXPECT_EQ(ReducescatterShare(10, 0, 4), 3);
  EXPECT_EQ(ReducescatterShare(10, 1, 4), 3);
  EXPECT_EQ(ReducescatterShare(10, 2, 4), 2);
  EXPECT_EQ(ReducescatterShare(10, 3, 4), 2);
  EXPECT_EQ(ReducescatterShare(1, 2, 3), 0);
}

struct RsCase {
  int ranks;
  DataType dtype;
  ReduceOp op;
};

class ReducescatterMatches : public ::testing::TestWithParam<RsCase> {};

TEST_P(ReducescatterMatches, Reference) {
  const RsCase c = GetParam();
  const int64_t cols = 3;
  const std::vector<int64_t> row_counts = {0, 1, 5, 8};
  RunRuntimes(c.ranks, FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    std::vector<std::vector<char>> in;
    std::vector<std::shared_ptr<Handle>> handles;
    for (size_t k = 0; k < row_counts.size(); ++k) {
      const size_t count = static_cast<size_t>(row_counts[k] * cols);
      in.push_back(testing::Buffer(c.dtype, count));
      for (size_t i = 0; i < count; ++i) Store(c.dtype, in.back().data(), i, Value(c.dtype, c.op, rank, i));
      auto h = rt.Enqueue(Reducescatter("rs" + std::to_string(k), in.back().data(), c.dtype,
                                        {row_counts[k], cols}, c.op));
      ASSERT_TRUE(h.ok()) << h.status().ToString();
      handles.push_back(*h);
    }
    for (size_t k = 0; k < row_counts.size(); ++k) {
      Status s = WaitFor(*handles[k]);
      ASSERT_TRUE(s.ok()) << s.ToString();
      const OutputBuffer& out = handles[k]->output();
      const int64_t share = ReducescatterShare(row_counts[k], rank, c.ranks);
      ASSERT_EQ(out.shape, (std::vector<int64_t>{share, cols})) << "rows " << row_counts[k];
      int64_t start = 0;
      for (int r = 0; r < rank; ++r) start += ReducescatterShare(row_counts[k], r, c.ranks);
      int wrong = 0;
      for (size_t i = 0; i < static_cast<size_t>(share * cols); ++i) {
        const double want = Reference(c.dtype, c.op, c.ranks, static_cast<size_t>(start * cols) + i);
        const double got = Load(c.dtype, out.data.get(), i);
        if (std::fabs(got - want) > Tolerance(c.dtype, want) && wrong++ == 0) {
          ADD_FAILURE() << "rank " << rank << " rows " << row_counts[k] << ": first wrong index "
                        << i << ": expected " << want << ", got " << got;
        }
      }
      // The input is never written.
      for (size_t i = 0; i < static_cast<size_t>(row_counts[k] * cols); ++i) {
        ASSERT_EQ(Load(c.dtype, in[k].data(), i), Value(c.dtype, c.op, rank, i));
      }
    }
  });
}

std::vector<RsCase> RsCases() {
  std::vector<RsCase> cases;
  for (int ranks : {1, 2, 3, 4}) {
    for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                       DataType::kFloat64, DataType::kInt32, DataType::kInt8, DataType::kUInt8,
                       DataType::kInt64}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) cases.push_back({ranks, t, op});
    }
    cases.push_back({ranks, DataType::kBool, ReduceOp::kSum});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(ThreadWorld, ReducescatterMatches, ::testing::ValuesIn(RsCases()),
                         [](const ::testing::TestParamInfo<RsCase>& info) {
                           return "np" + std::to_string(info.param.ranks) + "_" +
                                  std::string(DataTypeName(info.param.dtype)) + "_" +
                                  std::string(ReduceOpName(info.param.op));
                         });

TEST(RuntimeOps, ReducescatterScaleFactors) {
  const int ranks = 3;
  RunRuntimes(ranks, FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kInt32}) {
      std::vector<char> in = testing::Buffer(t, 7);
      for (size_t i = 0; i < 7; ++i) Store(t, in.data(), i, Value(t, ReduceOp::kAverage, rank, i));
      Submission s = Reducescatter("scaled", in.data(), t, {7}, ReduceOp::kAverage);
      s.prescale = 0.5;
      s.postscale = 4.0;
      auto h = rt.Enqueue(s);
      ASSERT_TRUE(h.ok());
      ASSERT_TRUE(WaitFor(**h).ok());
      const int64_t start = rank == 0 ? 0 : rank == 1 ? 3 : 5;  // shares 3, 2, 2
      const OutputBuffer& out = (*h)->output();
      ASSERT_EQ(out.shape[0], rank == 0 ? 3 : 2);
      for (int64_t i = 0; i < out.shape[0]; ++i) {
        const double want = Reference(t, ReduceOp::kAverage, ranks, start + i, 0.5, 4.0);
        EXPECT_NEAR(Load(t, out.data.get(), i), want, Tolerance(t, want))
            << DataTypeName(t) << " rank " << rank << " index " << i;
      }
    }
  });
}

TEST(RuntimeOps, ReducescatterRefusalsAndMismatches) {
  std::atomic<int> done{0};
  RunRuntimes(2, FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    std::vector<float> in(8, 1.0f);
    // Max is refused on rank 1; rank 0's Sum fails with rank 1's reason.
    auto h = rt.Enqueue(Reducescatter("rs", in.data(), DataType::kFloat32, {8},
                                      rank == 1 ? ReduceOp::kMax : ReduceOp::kSum));
    if (rank == 1) {
      ASSERT_FALSE(h.ok());
      EXPECT_EQ(h.status().message(),
                "reducescatter 'rs': reduce op max is not supported (only sum and average)");
    } else {
      ASSERT_TRUE(h.ok());
      Status s = WaitFor(**h);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(s.message(), "reducescatter 'rs': rank 1 refused it: reduce op max is not "
                             "supported (only sum and average)");
    }
    ++done;
    while (done.load() < 2) std::this_thread::yield();
    auto scalar = rt.Enqueue(Reducescatter("scalar", in.data(), DataType::kFloat32, {}, ReduceOp::kSum));
    EXPECT_EQ(scalar.status().code(), StatusCode::kInvalidArgument);
    auto m = rt.Enqueue(Reducescatter("m", in.data(), DataType::kFloat32,
                                      rank == 0 ? std::vector<int64_t>{4, 2} : std::vector<int64_t>{2, 4},
                                      ReduceOp::kSum));
    ASSERT_TRUE(m.ok());
    Status s = WaitFor(**m);
    EXPECT_EQ(s.message(), "reducescatter 'm': shape mismatch: rank 0 has [4,2], rank 1 has [2,4]");
    auto op = rt.Enqueue(Reducescatter("o", in.data(), DataType::kFloat32, {8},
                                       rank == 0 ? ReduceOp::kSum : ReduceOp::kAverage));
    ASSERT_TRUE(op.ok());
    EXPECT_EQ(WaitFor(**op).message(),
              "reducescatter 'o': reduce op mismatch: rank 0 has sum, rank 1 has average");
  });
}

// Rank r's input row j (of n_r) holds r * 100 + j * 4 + c in column c (c < 4, j < 25: unique,
// and exact in float16).
double RowValue(int r, int64_t j, int64_t c) { return r * 100.0 + j * 4.0 + c; }

// splits_r[q] = (r + 2q) % 3: zeros included, uneven.
std::vector<int64_t> TestSplits(int r, int size) {
  std::vector<int64_t> s(size);
  for (int q = 0; q < size; ++q) s[q] = (r + 2 * q) % 3;
  return s;
}

void CheckAlltoall(const OutputBuffer& out, DataType t, int rank, int size, int64_t cols,
                   const std::function<std::vector<int64_t>(int)>& splits_of) {
  std::vector<int64_t> want_splits(size);
  int64_t rows = 0;
  for (int q = 0; q < size; ++q) rows += want_splits[q] = splits_of(q)[rank];
  ASSERT_EQ(out.shape, (std::vector<int64_t>{rows, cols}));
  ASSERT_EQ(out.splits, want_splits);
  int64_t k = 0;
  for (int q = 0; q < size; ++q) {
    const std::vector<int64_t> sq = splits_of(q);
    int64_t first = 0;
    for (int d = 0; d < rank; ++d) first += sq[d];
    for (int64_t j = first; j < first + sq[rank]; ++j, ++k) {
      for (int64_t c = 0; c < cols; ++c) {
        ASSERT_EQ(Load(t, out.data.get(), static_cast<size_t>(k * cols + c)), RowValue(q, j, c))
            << "rank " << rank << " output row " << k << " (from rank " << q << ")";
      }
    }
  }
}

class AlltoallMatches : public ::testing::TestWithParam<std::tuple<int, DataType>> {};

TEST_P(AlltoallMatches, Reference) {
  const auto [ranks, t] = GetParam();
  const int64_t cols = 2;
  RunRuntimes(ranks, FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    // Uneven splits, then empty splits (equal split of (rank + 1) * ranks rows).
    for (int variant = 0; variant < 2; ++variant) {
      std::vector<int64_t> splits = TestSplits(rank, ranks);
      int64_t rows = 0;
      for (int64_t v : splits) rows += v;
      if (variant == 1) rows = (rank + 1) * ranks;
      std::vector<char> in = testing::Buffer(t, static_cast<size_t>(rows * cols));
      for (int64_t j = 0; j < rows; ++j) {
        for (int64_t c = 0; c < cols; ++c) Store(t, in.data(), j * cols + c, RowValue(rank, j, c));
      }
      auto h = rt.Enqueue(Alltoall("a2a" + std::to_string(variant), in.data(), t, {rows, cols},
                                   variant == 0 ? splits : std::vector<int64_t>{}));
      ASSERT_TRUE(h.ok()) << h.status().ToString();
      ASSERT_TRUE(WaitFor(**h).ok()) << (*h)->status().ToString();
      if (variant == 0) {
        CheckAlltoall((*h)->output(), t, rank, ranks, cols, [&](int q) { return TestSplits(q, ranks); });
      } else {
        CheckAlltoall((*h)->output(), t, rank, ranks, cols,
                      [&](int q) { return std::vector<int64_t>(ranks, q + 1); });
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(ThreadWorld, AlltoallMatches,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values(DataType::kFloat32, DataType::kInt64,
                                                              DataType::kFloat16)),
                         [](const auto& info) {
                           return "np" + std::to_string(std::get<0>(info.param)) + "_" +
                                  std::string(DataTypeName(std::get<1>(info.param)));
                         });

TEST(RuntimeOps, AlltoallRefusalsAndMismatches) {
  std::atomic<int> done{0};
  RunRuntimes(3, FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    std::vector<float> in(12, 1.0f);
    // Rank 2 has 4 rows and no splits: not divisible by 3, refused; the others fail with it.
    auto h = rt.Enqueue(Alltoall("eq", in.data(), DataType::kFloat32, {rank == 2 ? 4 : 3},
                                 {}));
    if (rank == 2) {
      ASSERT_FALSE(h.ok());
      EXPECT_EQ(h.status().message(),
                "alltoall 'eq': first dimension 4 is not divisible by 3 ranks (give splits)");
    } else {
      ASSERT_TRUE(h.ok());
      EXPECT_EQ(WaitFor(**h).message(), "alltoall 'eq': rank 2 refused it: first dimension 4 is "
                                        "not divisible by 3 ranks (give splits)");
    }
    ++done;
    while (done.load() < 3) std::this_thread::yield();
    auto bad_sum = rt.Enqueue(Alltoall("s", in.data(), DataType::kFloat32, {4}, {1, 1, 1}));
    EXPECT_EQ(bad_sum.status().code(), StatusCode::kInvalidArgument);
    auto few = rt.Enqueue(Alltoall("f", in.data(), DataType::kFloat32, {4}, {4}));
    EXPECT_EQ(few.status().code(), StatusCode::kInvalidArgument);
    // Trailing dims differ on rank 1; first dims may differ freely.
    auto m = rt.Enqueue(Alltoall("m", in.data(), DataType::kFloat32,
                                 rank == 1 ? std::vector<int64_t>{3, 4} : std::vector<int64_t>{rank, 2},
                                 rank == 1 ? std::vector<int64_t>{1, 1, 1} : std::vector<int64_t>{rank, 0, 0}));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(WaitFor(**m).message(),
              "alltoall 'm': shape (all but the first dimension) mismatch: ranks 0,2 have [0,2], "
              "rank 1 has [3,4]");
  });
}

TEST(RuntimeOps, BarrierWaitsForEveryRankAndRepeats) {
  const int ranks = 4;
  std::atomic<int> entered[3] = {{0}, {0}, {0}};
  RunRuntimes(ranks, FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    for (int b = 0; b < 3; ++b) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10 * ((rank + b) % ranks)));
      ++entered[b];
      Status s = rt.Barrier();
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(entered[b].load(), ranks) << "rank " << rank << " left barrier " << b << " early";
    }
    // The reserved names are refused for other operations.
    std::vector<float> v(2);
    Submission s = Reducescatter("__kolo_barrier.7", v.data(), DataType::kFloat32, {2}, ReduceOp::kSum);
    EXPECT_EQ(rt.Enqueue(s).status().code(), StatusCode::kInvalidArgument);
  });
}

}  // namespace
}  // namespace kolo
