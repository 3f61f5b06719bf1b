// Tier 2: reducescatter, alltoall, barrier and join through the C API under mpirun (2, 3, 4
// ranks): results against references built locally from every rank's known inputs (uneven
// shares, zero rows, empty and uneven splits, float16, integer Average; with join, the joined
// ranks' identities), and mismatches reported on every rank.
#include <kolo/kolo.h>

#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace kolo_test {
namespace {

int64_t Share(int64_t rows, int r, int size) { return rows / size + (r < rows % size ? 1 : 0); }

// The rows of rank `rank`'s share of `full` (rows x cols), with their tolerances.
Reference Slice(const Reference& full, int64_t rows, int64_t cols, int rank, int size) {
  int64_t start = 0;
  for (int r = 0; r < rank; ++r) start += Share(rows, r, size);
  const int64_t n = Share(rows, rank, size) * cols;
  const size_t esize = DtypeBytes(full.expected.dtype);
  Reference out;
  out.expected = TypedBuffer(full.expected.dtype, n);
  if (n) {
    std::memcpy(out.expected.data(),
                static_cast<const char*>(full.expected.data()) + start * cols * esize, n * esize);
  }
  if (!full.tolerance.empty()) {
    out.tolerance.assign(full.tolerance.begin() + start * cols,
                         full.tolerance.begin() + start * cols + n);
  }
  return out;
}

kolo_status_t SubmitReducescatter(const std::string& name, const TypedBuffer& input,
                                  const std::vector<int64_t>& shape, kolo_reduce_op_t op,
                                  Handle& h, double pre = 1.0, double post = 1.0) {
  return kolo_reducescatter_async(name.c_str(), input.data(), input.dtype,
                                  static_cast<int>(shape.size()), shape.data(), op, pre, post,
                                  h.out());
}

kolo_status_t SubmitAlltoall(const std::string& name, const TypedBuffer& input,
                             const std::vector<int64_t>& shape, const std::vector<int64_t>& splits,
                             Handle& h) {
  return kolo_alltoall_async(name.c_str(), input.data(), input.dtype,
                             static_cast<int>(shape.size()), shape.data(),
                             splits.empty() ? nullptr : splits.data(), h.out());
}

void CheckReducescatter(kolo_dtype_t dtype, kolo_reduce_op_t op, double pre, double post) {
  const int rank = WorldRank(), size = WorldSize();
  const int64_t cols = 3;
  const bool scaled = pre != 1.0 || post != 1.0;
  for (int64_t rows : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{2 * size + 1}}) {
    const std::string name = TensorName(std::string(DtypeName(dtype)) + "/" + ReduceOpName(op) +
                                        "/" + std::to_string(rows));
    const DataKind kind = KindFor(dtype, op, scaled);
    TypedBuffer in = RankUniqueData(dtype, rows * cols, rank, kind, rows);
    const TypedBuffer in_copy = in;
    Handle h;
    ASSERT_EQ(SubmitReducescatter(name, in, {rows, cols}, op, h, pre, post), KOLO_SUCCESS)
        << LastError();
    ASSERT_EQ(WaitHandle(h, name), KOLO_SUCCESS) << kolo_handle_message(h.get());
    const void* data = nullptr;
    int ndim = 0;
    int64_t shape[KOLO_MAX_DIMS];
    ASSERT_EQ(kolo_handle_output(h.get(), &data, &ndim, shape), KOLO_SUCCESS);
    ASSERT_EQ(ndim, 2);
    ASSERT_EQ(shape[0], Share(rows, rank, size)) << name;
    ASSERT_EQ(shape[1], cols);
    const Reference full =
        AllreduceReference(AllRanksData(dtype, rows * cols, size, kind, rows), op, pre, post);
    EXPECT_MATCHES_REFERENCE(data, Slice(full, rows, cols, rank, size)) << name;
    EXPECT_BUFFERS_EQUAL(in, in_copy) << name << ": input written";
  }
}

TEST(OpsTest, ReducescatterEveryDtypeSumAndAverage) {
  for (kolo_dtype_t dtype : AllDtypes()) {
    for (kolo_reduce_op_t op : {KOLO_OP_SUM, KOLO_OP_AVERAGE}) {
      if (dtype == KOLO_BOOL && op == KOLO_OP_AVERAGE) continue;
      CheckReducescatter(dtype, op, 1.0, 1.0);
    }
  }
}

TEST(OpsTest, ReducescatterScaleFactors) {
  for (kolo_dtype_t dtype : {KOLO_FLOAT32, KOLO_FLOAT16, KOLO_INT32, KOLO_FLOAT64}) {
    CheckReducescatter(dtype, KOLO_OP_AVERAGE, 0.5, 4.0);
    CheckReducescatter(dtype, KOLO_OP_SUM, 2.0, 0.25);
  }
}

TEST(OpsTest, ReducescatterRefusedOpFailsEveryRank) {
  const int rank = WorldRank(), last = WorldSize() - 1;
  const std::string name = TensorName("rs");
  TypedBuffer in = RankUniqueData(KOLO_FLOAT32, 8, rank, DataKind::kWide);
  Handle h;
  const kolo_status_t s = SubmitReducescatter(name, in, {8}, rank == last ? KOLO_OP_MAX : KOLO_OP_SUM, h);
  if (rank == last) {
    EXPECT_EQ(s, KOLO_ERR_INVALID_ARGUMENT);
    EXPECT_NE(LastError().find("not supported"), std::string::npos) << LastError();
  } else {
    ASSERT_EQ(s, KOLO_SUCCESS) << LastError();
    EXPECT_EQ(WaitHandle(h, name), KOLO_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(std::string(kolo_handle_message(h.get())),
              "reducescatter '" + name + "': rank " + std::to_string(last) +
                  " refused it: reduce op max is not supported (only sum and average)");
  }
}

TEST(OpsTest, ReducescatterShapeMismatchFailsEveryRank) {
  const int rank = WorldRank(), last = WorldSize() - 1;
  const std::string name = TensorName("rs");
  TypedBuffer in = RankUniqueData(KOLO_FLOAT32, 12, rank, DataKind::kWide);
  Handle h;
  ASSERT_EQ(SubmitReducescatter(name, in, rank == last ? std::vector<int64_t>{4, 3}
                                                        : std::vector<int64_t>{3, 4},
                                KOLO_OP_SUM, h),
            KOLO_SUCCESS)
      << LastError();
  EXPECT_EQ(WaitHandle(h, name), KOLO_ERR_INVALID_ARGUMENT);
  const std::string msg = kolo_handle_message(h.get());
  EXPECT_NE(msg.find("reducescatter '" + name + "': shape mismatch"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank " + std::to_string(last) + " has [4,3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[3,4]"), std::string::npos) << msg;
}

// splits_r[q] = (r + 2q) % 3: uneven, with zeros.
std::vector<int64_t> TestSplits(int r, int size) {
  std::vector<int64_t> s(size);
  for (int q = 0; q < size; ++q) s[q] = (r + 2 * q) % 3;
  return s;
}

void CheckAlltoall(kolo_dtype_t dtype, bool equal) {
  const int rank = WorldRank(), size = WorldSize();
  const int64_t cols = 2;
  auto splits_of = [&](int r) {
    return equal ? std::vector<int64_t>(size, r + 1) : TestSplits(r, size);
  };
  auto rows_of = [&](int r) {
    int64_t n = 0;
    for (int64_t v : splits_of(r)) n += v;
    return n;
  };
  const std::string name =
      TensorName(std::string(DtypeName(dtype)) + (equal ? "/equal" : "/uneven"));
  TypedBuffer in = RankUniqueData(dtype, rows_of(rank) * cols, rank, DataKind::kWide, 11);
  Handle h;
  ASSERT_EQ(SubmitAlltoall(name, in, {rows_of(rank), cols},
                           equal ? std::vector<int64_t>{} : splits_of(rank), h),
            KOLO_SUCCESS)
      << LastError();
  ASSERT_EQ(WaitHandle(h, name), KOLO_SUCCESS) << kolo_handle_message(h.get());
  // Expected: from every rank q, the rows q addressed to this rank, in rank order.
  TypedBuffer want;
  std::vector<int64_t> want_splits(size);
  std::vector<unsigned char> bytes;
  const size_t row_bytes = cols * DtypeBytes(dtype);
  for (int q = 0; q < size; ++q) {
    const TypedBuffer qin = RankUniqueData(dtype, rows_of(q) * cols, q, DataKind::kWide, 11);
    const std::vector<int64_t> sq = splits_of(q);
    int64_t first = 0;
    for (int d = 0; d < rank; ++d) first += sq[d];
    want_splits[q] = sq[rank];
    const auto* p = static_cast<const unsigned char*>(qin.data()) + first * row_bytes;
    bytes.insert(bytes.end(), p, p + sq[rank] * row_bytes);
  }
  int64_t rows = 0;
  for (int64_t v : want_splits) rows += v;
  want = TypedBuffer(dtype, rows * cols);
  if (!bytes.empty()) std::memcpy(want.data(), bytes.data(), bytes.size());
  const void* data = nullptr;
  int ndim = 0;
  int64_t shape[KOLO_MAX_DIMS];
  ASSERT_EQ(kolo_handle_output(h.get(), &data, &ndim, shape), KOLO_SUCCESS);
  ASSERT_EQ(ndim, 2);
  EXPECT_EQ(shape[0], rows);
  EXPECT_EQ(shape[1], cols);
  std::vector<int64_t> got_splits(size, -1);
  ASSERT_EQ(kolo_handle_received_splits(h.get(), got_splits.data()), KOLO_SUCCESS);
  EXPECT_EQ(got_splits, want_splits);
  EXPECT_TRUE(BytesEqual(data, want)) << name;
}

TEST(OpsTest, AlltoallUnevenAndEqualSplits) {
  for (kolo_dtype_t dtype : {KOLO_FLOAT32, KOLO_INT8, KOLO_FLOAT16, KOLO_INT64}) {
    CheckAlltoall(dtype, false);
    CheckAlltoall(dtype, true);
  }
}

TEST(OpsTest, AlltoallReceivedSplitsOnlyForAlltoall) {
  const int rank = WorldRank();
  TypedBuffer in = RankUniqueData(KOLO_FLOAT32, 6, rank, DataKind::kWide);
  Handle h;
  ASSERT_EQ(SubmitReducescatter(TensorName("rs"), in, {6}, KOLO_OP_SUM, h), KOLO_SUCCESS);
  ASSERT_EQ(WaitHandle(h, "rs"), KOLO_SUCCESS);
  std::vector<int64_t> splits(WorldSize());
  EXPECT_EQ(kolo_handle_received_splits(h.get(), splits.data()), KOLO_ERR_FAILED_PRECONDITION);
  EXPECT_EQ(kolo_handle_received_splits(h.get(), nullptr), KOLO_ERR_INVALID_ARGUMENT);
}

TEST(OpsTest, AlltoallMismatchesFailEveryRank) {
  const int rank = WorldRank(), size = WorldSize(), last = size - 1;
  {
    const std::string name = TensorName("dims");
    TypedBuffer in = RankUniqueData(KOLO_FLOAT32, size * 6, rank, DataKind::kWide);
    Handle h;
    ASSERT_EQ(SubmitAlltoall(name, in, rank == last ? std::vector<int64_t>{size, 6}
                                                     : std::vector<int64_t>{2 * size, 3},
                             {}, h),
              KOLO_SUCCESS)
        << LastError();
    EXPECT_EQ(WaitHandle(h, name), KOLO_ERR_INVALID_ARGUMENT);
    const std::string msg = kolo_handle_message(h.get());
    EXPECT_NE(msg.find("alltoall '" + name + "': shape (all but the first dimension) mismatch"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("rank " + std::to_string(last) + " has [" + std::to_string(size) + ",6]"),
              std::string::npos)
        << msg;
  }
  {
    const std::string name = TensorName("dtype");
    const kolo_dtype_t dtype = rank == last ? KOLO_INT32 : KOLO_FLOAT32;
    TypedBuffer in = RankUniqueData(dtype, size, rank, DataKind::kWide);
    Handle h;
    ASSERT_EQ(SubmitAlltoall(name, in, {size}, {}, h), KOLO_SUCCESS) << LastError();
    EXPECT_EQ(WaitHandle(h, name), KOLO_ERR_INVALID_ARGUMENT);
    const std::string msg = kolo_handle_message(h.get());
    EXPECT_NE(msg.find("alltoall '" + name + "': dtype mismatch"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank " + std::to_string(last) + " has int32"), std::string::npos) << msg;
  }
  {
    // Splits that do not sum to the first dimension: refused on the last rank, others fail.
    const std::string name = TensorName("splits");
    TypedBuffer in = RankUniqueData(KOLO_FLOAT32, size, rank, DataKind::kWide);
    std::vector<int64_t> splits(size, 1);
    if (rank == last) splits[0] = 2;
    Handle h;
    const kolo_status_t s = SubmitAlltoall(name, in, {size}, splits, h);
    if (rank == last) {
      EXPECT_EQ(s, KOLO_ERR_INVALID_ARGUMENT);
    } else {
      ASSERT_EQ(s, KOLO_SUCCESS) << LastError();
      EXPECT_EQ(WaitHandle(h, name), KOLO_ERR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(kolo_handle_message(h.get()))
                    .find("rank " + std::to_string(last) + " refused it"),
                std::string::npos)
          << kolo_handle_message(h.get());
    }
  }
  WorldBarrier();  // the refused rank's announcement is negotiated before the next test
}

TEST(OpsTest, BarrierWaitsForEveryRank) {
  const int rank = WorldRank(), size = WorldSize();
  using Clock = std::chrono::system_clock;
  for (int b = 0; b < 3; ++b) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30 * ((rank + b) % size)));
    const double entered =
        std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
    ASSERT_EQ(kolo_barrier(), KOLO_SUCCESS) << LastError();
    const double left = std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
    std::vector<double> all(size);
    MPI_Allgather(&entered, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD);
    for (int r = 0; r < size; ++r) {
      EXPECT_LE(all[r], left + 1e-3) << "rank " << rank << " left barrier " << b
                                     << " before rank " << r << " entered it";
    }
  }
}

// What a joined rank contributes to an allreduce: the identity of `op`.
TypedBuffer IdentityData(kolo_dtype_t dtype, int64_t count, kolo_reduce_op_t op) {
  TypedBuffer b(dtype, count);
  const bool is_min = op == KOLO_OP_MIN, is_max = op == KOLO_OP_MAX;
  for (int64_t i = 0; i < count; ++i) {
    if (op == KOLO_OP_PRODUCT) {
      IsFloat(dtype) ? StoreFloat(dtype, b.data(), i, 1.0) : StoreInt(dtype, b.data(), i, 1);
    } else if (!is_min && !is_max) {
      IsFloat(dtype) ? StoreFloat(dtype, b.data(), i, 0.0) : StoreInt(dtype, b.data(), i, 0);
    } else if (dtype == KOLO_BOOL) {
      StoreInt(dtype, b.data(), i, is_min ? 1 : 0);
    } else if (IsFloat(dtype)) {
      StoreFloat(dtype, b.data(), i, is_min ? INFINITY : -INFINITY);
    } else {
      const int bits = IntegerBits(dtype);
      const int64_t hi = IsSigned(dtype) ? std::numeric_limits<int64_t>::max() >> (64 - bits)
                                         : -1;  // all ones: StoreInt wraps
      const int64_t lo = IsSigned(dtype) ? -hi - 1 : 0;
      StoreInt(dtype, b.data(), i, is_min ? hi : lo);
    }
  }
  return b;
}

// Rank r allreduces for (r+1)*2 steps (round 0; the reverse in round 1), then joins; every
// step's result is the reference over the active ranks' data and the joined ranks' identities
// (Average divides by the full size); join returns the last joiner on every rank; twice.
TEST(OpsTest, JoinWithUnevenSteps) {
  const int rank = WorldRank(), size = WorldSize();
  const int64_t count = 17;
  struct Combo {
    kolo_dtype_t dtype;
    kolo_reduce_op_t op;
  };
  const std::vector<Combo> combos = {
      {KOLO_FLOAT32, KOLO_OP_SUM},    {KOLO_FLOAT32, KOLO_OP_AVERAGE}, {KOLO_FLOAT32, KOLO_OP_MIN},
      {KOLO_FLOAT32, KOLO_OP_MAX},    {KOLO_INT32, KOLO_OP_MIN},       {KOLO_INT32, KOLO_OP_MAX},
      {KOLO_INT32, KOLO_OP_PRODUCT},  {KOLO_INT32, KOLO_OP_AVERAGE},   {KOLO_FLOAT16, KOLO_OP_SUM},
      {KOLO_BFLOAT16, KOLO_OP_MIN},   {KOLO_BOOL, KOLO_OP_SUM},        {KOLO_BOOL, KOLO_OP_MIN},
      {KOLO_FLOAT64, KOLO_OP_PRODUCT}, {KOLO_UINT8, KOLO_OP_MIN},
  };
  for (int round = 0; round < 2; ++round) {
    auto steps_of = [&](int r) { return (round == 0 ? r + 1 : size - r) * 2; };
    for (int step = 0; step < steps_of(rank); ++step) {
      std::vector<TypedBuffer> in, out;
      std::vector<Handle> handles(combos.size());
      for (size_t k = 0; k < combos.size(); ++k) {
        const Combo& c = combos[k];
        in.push_back(RankUniqueData(c.dtype, count, rank, KindFor(c.dtype, c.op, false),
                                    step * 31 + k));
        out.emplace_back(c.dtype, count);
      }
      for (size_t k = 0; k < combos.size(); ++k) {
        const Combo& c = combos[k];
        const std::string name =
            TensorName(std::string(DtypeName(c.dtype)) + "/" + ReduceOpName(c.op));
        ASSERT_EQ(SubmitAllreduce(name, in[k], &out[k], {count}, c.op, handles[k]), KOLO_SUCCESS)
            << LastError();
      }
      for (size_t k = 0; k < combos.size(); ++k) {
        const Combo& c = combos[k];
        const std::string what = std::string(DtypeName(c.dtype)) + "/" + ReduceOpName(c.op) +
                                 " round " + std::to_string(round) + " step " +
                                 std::to_string(step);
        ASSERT_EQ(WaitHandle(handles[k], what), KOLO_SUCCESS)
            << what << ": " << kolo_handle_message(handles[k].get());
        std::vector<TypedBuffer> all;
        for (int q = 0; q < size; ++q) {
          all.push_back(step < steps_of(q)
                            ? RankUniqueData(c.dtype, count, q, KindFor(c.dtype, c.op, false),
                                             step * 31 + k)
                            : IdentityData(c.dtype, count, c.op));
        }
        EXPECT_MATCHES_REFERENCE(out[k].data(), AllreduceReference(all, c.op)) << what;
      }
    }
    int last = -1;
    ASSERT_EQ(kolo_join(&last), KOLO_SUCCESS) << LastError();
    EXPECT_EQ(last, round == 0 ? size - 1 : 0);
  }
}

// The last rank joins at once; the others' allgather and broadcast fail naming it, their
// allreduce goes on; every rank's join returns the same last joiner.
TEST(OpsTest, JoinFailsOtherOpsOnTheSubmitters) {
  const int rank = WorldRank(), size = WorldSize();
  const int joiner = size - 1;
  int last = -1;
  if (rank != joiner) {
    TypedBuffer in = RankUniqueData(KOLO_FLOAT32, 6, rank, DataKind::kWide);
    TypedBuffer out(KOLO_FLOAT32, 6);
    const std::string tail =
        "': rank " + std::to_string(joiner) + " has joined and cannot take part in ";
    {
      const std::string name = TensorName("gather");
      Handle h;
      ASSERT_EQ(SubmitAllgather(name, in, {2, 3}, h), KOLO_SUCCESS) << LastError();
      EXPECT_EQ(WaitHandle(h, name), KOLO_ERR_INVALID_ARGUMENT);
      EXPECT_EQ(std::string(kolo_handle_message(h.get())), "allgather '" + name + tail + "allgather");
    }
    {
      const std::string name = TensorName("bcast");
      Handle h;
      ASSERT_EQ(SubmitBroadcast(name, in, &out, {6}, 0, h), KOLO_SUCCESS) << LastError();
      EXPECT_EQ(WaitHandle(h, name), KOLO_ERR_INVALID_ARGUMENT);
      EXPECT_EQ(std::string(kolo_handle_message(h.get())), "broadcast '" + name + tail + "broadcast");
    }
    {
      const std::string name = TensorName("sum");
      Handle h;
      ASSERT_EQ(SubmitAllreduce(name, in, &out, {6}, KOLO_OP_SUM, h), KOLO_SUCCESS) << LastError();
      ASSERT_EQ(WaitHandle(h, name), KOLO_SUCCESS) << kolo_handle_message(h.get());
      std::vector<TypedBuffer> all;
      for (int q = 0; q < size; ++q) {
        all.push_back(q == joiner ? IdentityData(KOLO_FLOAT32, 6, KOLO_OP_SUM)
                                  : RankUniqueData(KOLO_FLOAT32, 6, q, DataKind::kWide));
      }
      EXPECT_MATCHES_REFERENCE(out.data(), AllreduceReference(all, KOLO_OP_SUM));
    }
  }
  ASSERT_EQ(kolo_join(&last), KOLO_SUCCESS) << LastError();
  std::vector<int> lasts(size);
  MPI_Allgather(&last, 1, MPI_INT, lasts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  for (int r = 0; r < size; ++r) EXPECT_EQ(lasts[r], lasts[0]) << "rank " << r;
  if (size > 1) {
    EXPECT_NE(last, joiner);
  }
  ASSERT_EQ(kolo_join(nullptr), KOLO_SUCCESS) << LastError();  // again, all at once
  ASSERT_EQ(kolo_barrier(), KOLO_SUCCESS) << LastError();
}

}  // namespace
}  // namespace kolo_test
