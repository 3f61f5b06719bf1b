// Tier 2: kolo_submit and kolo_submit_group, the C API that takes an operation as the fields of a
// kolo_op_args_t, under mpirun: every collective's result against a reference over every rank's
// known inputs (rank r's element i is 100 r + i), and the refusals that only this API has.
#include <kolo/kolo.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace kolo_test {
namespace {

// Rank r's input of `count` float64 elements: 100 r + i.
std::vector<double> Input(int r, int64_t count) {
  std::vector<double> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = 100.0 * r + i;
  return v;
}

// A float64 operation's fields, the rest at their defaults.
kolo_op_args_t Args(kolo_collective_t collective, const std::string& name, const void* input,
                    int ndim, const int64_t* shape) {
  kolo_op_args_t a = KOLO_OP_ARGS_INIT;
  a.collective = collective;
  a.name = name.c_str();
  a.input = input;
  a.dtype = KOLO_FLOAT64;
  a.ndim = ndim;
  a.shape = shape;
  return a;
}

// Waits for `h`, returns its output as doubles (and its first dimension in *rows), frees it.
std::vector<double> Output(kolo_handle_t h, int64_t* rows) {
  EXPECT_EQ(kolo_wait(h), KOLO_SUCCESS) << kolo_handle_message(h);
  const void* data = nullptr;
  int ndim = 0;
  int64_t shape[KOLO_MAX_DIMS] = {0};
  EXPECT_EQ(kolo_handle_output(h, &data, &ndim, shape), KOLO_SUCCESS) << LastError();
  *rows = shape[0];
  int64_t count = 1;
  for (int d = 0; d < ndim; ++d) count *= shape[d];
  const double* p = static_cast<const double*>(data);
  std::vector<double> out(p, p + count);
  kolo_handle_free(h);
  return out;
}

TEST(SubmitArgsTest, EveryCollectiveFromItsFields) {
  const int n = WorldSize(), me = WorldRank();
  const int64_t count = 6;
  const std::string base = TensorName("");

  // All-reduce, scaled: 0.5 * sum_r (2 * input_r).
  std::vector<double> in = Input(me, count), out(count, -1);
  const std::string ar = base + "allreduce";
  kolo_op_args_t a = Args(KOLO_COLLECTIVE_ALLREDUCE, ar, in.data(), 1, &count);
  a.output = out.data();
  a.prescale_factor = 2.0;
  a.postscale_factor = 0.5;
  kolo_handle_t h = nullptr;
  ASSERT_EQ(kolo_submit(&a, &h), KOLO_SUCCESS) << LastError();
  ASSERT_EQ(kolo_wait(h), KOLO_SUCCESS) << kolo_handle_message(h);
  kolo_handle_free(h);
  for (int64_t i = 0; i < count; ++i) {
    double want = 0;
    for (int r = 0; r < n; ++r) want += 0.5 * (2.0 * Input(r, count)[static_cast<size_t>(i)]);
    EXPECT_EQ(out[static_cast<size_t>(i)], want) << "element " << i;
  }

  // Broadcast from the last rank.
  const std::string bc = base + "broadcast";
  std::vector<double> got(count, -1);
  kolo_op_args_t b = Args(KOLO_COLLECTIVE_BROADCAST, bc, in.data(), 1, &count);
  b.output = got.data();
  b.root_rank = n - 1;
  ASSERT_EQ(kolo_submit(&b, &h), KOLO_SUCCESS) << LastError();
  ASSERT_EQ(kolo_wait(h), KOLO_SUCCESS) << kolo_handle_message(h);
  kolo_handle_free(h);
  EXPECT_EQ(got, Input(n - 1, count));

  // All-gather: rank r contributes r + 1 rows of 2.
  const int64_t gather_shape[2] = {me + 1, 2};
  std::vector<double> rows = Input(me, 2 * (me + 1));
  const std::string ag = base + "allgather";
  kolo_op_args_t g = Args(KOLO_COLLECTIVE_ALLGATHER, ag, rows.data(), 2, gather_shape);
  ASSERT_EQ(kolo_submit(&g, &h), KOLO_SUCCESS) << LastError();
  int64_t first = 0;
  std::vector<double> gathered = Output(h, &first), want;
  for (int r = 0; r < n; ++r) {
    const std::vector<double> part = Input(r, 2 * (r + 1));
    want.insert(want.end(), part.begin(), part.end());
  }
  EXPECT_EQ(first, n * (n + 1) / 2);
  EXPECT_EQ(gathered, want);

  // Reduce-scatter of n rows of 3: rank r receives row r of the sum.
  const int64_t scatter_shape[2] = {n, 3};
  std::vector<double> matrix = Input(me, 3 * n);
  const std::string rs = base + "reducescatter";
  kolo_op_args_t s = Args(KOLO_COLLECTIVE_REDUCESCATTER, rs, matrix.data(), 2, scatter_shape);
  ASSERT_EQ(kolo_submit(&s, &h), KOLO_SUCCESS) << LastError();
  std::vector<double> share = Output(h, &first);
  EXPECT_EQ(first, 1);
  ASSERT_EQ(share.size(), 3u);
  for (int j = 0; j < 3; ++j) {
    double sum = 0;
    for (int r = 0; r < n; ++r) sum += Input(r, 3 * n)[static_cast<size_t>(3 * me + j)];
    EXPECT_EQ(share[static_cast<size_t>(j)], sum) << "column " << j;
  }

  // All-to-all with splits: rank r sends q + 1 rows to rank q.
  std::vector<int64_t> splits(static_cast<size_t>(n));
  int64_t sent = 0;
  for (int q = 0; q < n; ++q) sent += splits[static_cast<size_t>(q)] = q + 1;
  const int64_t send_shape[1] = {sent};
  std::vector<double> payload = Input(me, sent);
  const std::string aa = base + "alltoall";
  kolo_op_args_t t = Args(KOLO_COLLECTIVE_ALLTOALL, aa, payload.data(), 1, send_shape);
  t.splits = splits.data();
  ASSERT_EQ(kolo_submit(&t, &h), KOLO_SUCCESS) << LastError();
  std::vector<double> received = Output(h, &first), expected;
  for (int r = 0; r < n; ++r) {
    // Rank r's rows for this rank start after the rows it sent to ranks 0..me-1.
    const std::vector<double> theirs = Input(r, sent);
    const int64_t offset = me * (me + 1) / 2;
    expected.insert(expected.end(), theirs.begin() + offset, theirs.begin() + offset + me + 1);
  }
  EXPECT_EQ(received, expected);
}

TEST(SubmitArgsTest, AGroupFromFields) {
  const int n = WorldSize(), me = WorldRank();
  const std::string base = TensorName("");
  const std::string names[2] = {base + "w", base + "b"};
  const int64_t counts[2] = {5, 3};
  std::vector<double> in[2] = {Input(me, 5), Input(me, 3)};
  std::vector<double> out[2] = {std::vector<double>(5), std::vector<double>(3)};
  kolo_op_args_t args[2];
  for (int i = 0; i < 2; ++i) {
    args[i] = Args(KOLO_COLLECTIVE_ALLREDUCE, names[i], in[i].data(), 1, &counts[i]);
    args[i].output = out[i].data();
    args[i].reduce_op = KOLO_OP_MAX;
  }
  kolo_handle_t h[2] = {nullptr, nullptr};
  ASSERT_EQ(kolo_submit_group(args, 2, h), KOLO_SUCCESS) << LastError();
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(kolo_wait(h[i]), KOLO_SUCCESS) << kolo_handle_message(h[i]);
    kolo_handle_free(h[i]);
    EXPECT_EQ(out[i], Input(n - 1, counts[i])) << names[i];  // the last rank's is the largest
  }
}

TEST(SubmitArgsTest, RefusesWhatTheCollectiveDoesNotReadAndBadVersions) {
  const std::string name = TensorName("x");
  const int64_t count = 4;
  std::vector<double> in(count, 1.0), out(count);
  kolo_op_args_t a = Args(KOLO_COLLECTIVE_ALLREDUCE, name, in.data(), 1, &count);
  a.output = out.data();
  kolo_handle_t h = nullptr;

  kolo_op_args_t rooted = a;
  rooted.root_rank = 1;
  EXPECT_EQ(kolo_submit(&rooted, &h), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("allreduce '" + name + "': root_rank is set, which allreduce does "
                             "not read"), std::string::npos) << LastError();
  EXPECT_EQ(h, nullptr);

  kolo_op_args_t gathered = a;
  gathered.collective = KOLO_COLLECTIVE_ALLGATHER;
  EXPECT_EQ(kolo_submit(&gathered, &h), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("output (kolo allocates"), std::string::npos) << LastError();

  kolo_op_args_t unknown = a;
  unknown.collective = static_cast<kolo_collective_t>(9);
  EXPECT_EQ(kolo_submit(&unknown, &h), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("unknown collective 9"), std::string::npos) << LastError();

  kolo_op_args_t old = a;
  old.size = 8;
  EXPECT_EQ(kolo_submit(&old, &h), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("args->size 8"), std::string::npos) << LastError();
  EXPECT_EQ(kolo_submit(nullptr, &h), KOLO_ERR_INVALID_ARGUMENT);

  // A group whose members differ in what they share.
  kolo_op_args_t pair[2] = {a, a};
  const std::string other = TensorName("y");
  pair[1].name = other.c_str();
  pair[1].reduce_op = KOLO_OP_MIN;
  kolo_handle_t hs[2] = {nullptr, nullptr};
  EXPECT_EQ(kolo_submit_group(pair, 2, hs), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("grouped allreduce: member 1 ('" + other +
                             "') differs from member 0 in its reduce_op"),
            std::string::npos) << LastError();
  EXPECT_EQ(hs[0], nullptr);
  EXPECT_EQ(hs[1], nullptr);

  // Every rank refused alike, so nothing waits; a proper submission still works.
  const std::string fine = TensorName("z");
  a.name = fine.c_str();
  ASSERT_EQ(kolo_submit(&a, &h), KOLO_SUCCESS) << LastError();
  EXPECT_EQ(kolo_wait(h), KOLO_SUCCESS) << kolo_handle_message(h);
  kolo_handle_free(h);
  EXPECT_EQ(out, std::vector<double>(count, WorldSize()));
}

}  // namespace
}  // namespace kolo_test
