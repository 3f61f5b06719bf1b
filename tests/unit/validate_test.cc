// runtime/validate.h on its own: each rule refuses what it names, with the reason alone (no
// "<op> '<name>'" label: Enqueue adds that), and lets the valid neighbour of each case through.
// Every expected reason is written from the rule's definition in validate.h.
#include "runtime/validate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace kolo {
namespace {

float g_in[64], g_out[64];  // buffers the submissions point at (never read here)

Submission Sub(OpType op, std::vector<int64_t> shape, DataType dtype = DataType::kFloat32) {
  Submission s;
  s.op = op;
  s.name = "t";
  s.dtype = dtype;
  s.shape = std::move(shape);
  s.input = g_in;
  s.output = g_out;
  return s;
}

// The refusal's code is kInvalidArgument (or `code`) and its message is `reason` exactly.
void ExpectRefused(const Submission& s, int size, const std::string& reason,
                   StatusCode code = StatusCode::kInvalidArgument) {
  const Status st = ValidateSubmission(s, size);
  ASSERT_FALSE(st.ok()) << "accepted; expected: " << reason;
  EXPECT_EQ(st.code(), code) << st.ToString();
  EXPECT_EQ(st.message(), reason);
}

TEST(Validate, ShapesThatCannotBeBuffers) {
  ExpectRefused(Sub(OpType::kAllreduce, {2, -1}), 2, "negative dimension in shape [2,-1]");
  const int64_t big = int64_t{1} << 62;  // 2^62 floats are 2^64 bytes
  ExpectRefused(Sub(OpType::kAllreduce, {big}), 2,
                "shape [" + std::to_string(big) + "] of float32 is larger than 2^63-1 bytes");
  EXPECT_TRUE(ValidateSubmission(Sub(OpType::kAllreduce, {big / 4 - 1}), 2).ok());
}

TEST(Validate, ReservedNamesBelongToTheirOperations) {
  Submission s = Sub(OpType::kAllreduce, {4});
  s.name = std::string(kBarrierPrefix) + "3";
  ExpectRefused(s, 2, std::string("names starting with '") + kBarrierPrefix +
                          "' are reserved for barriers");
  s.name = std::string(kJoinPrefix) + "1";
  ExpectRefused(s, 2, std::string("names starting with '") + kJoinPrefix +
                          "' are reserved for join");
  Submission barrier = Sub(OpType::kBarrier, {});
  barrier.name = "not-a-barrier-name";
  ExpectRefused(barrier, 2, std::string("names starting with '") + kBarrierPrefix +
                                "' are reserved for barriers");
  barrier.name = std::string(kBarrierPrefix) + "0";
  EXPECT_TRUE(ValidateSubmission(barrier, 2).ok());
}

TEST(Validate, BuffersWhereThereAreElements) {
  Submission s = Sub(OpType::kAllreduce, {4});
  s.input = nullptr;
  ExpectRefused(s, 2, "input is NULL");
  s = Sub(OpType::kAllreduce, {4});
  s.output = nullptr;
  ExpectRefused(s, 2, "output is NULL");
  // kolo allocates the outputs of these three.
  for (OpType op : {OpType::kAllgather, OpType::kReducescatter, OpType::kAlltoall}) {
    Submission k = Sub(op, {4});
    k.output = nullptr;
    EXPECT_TRUE(ValidateSubmission(k, 2).ok()) << OpTypeName(op);
  }
  // No elements, no buffers needed.
  Submission empty = Sub(OpType::kAllreduce, {0, 3});
  empty.input = empty.output = nullptr;
  EXPECT_TRUE(ValidateSubmission(empty, 2).ok());
}

TEST(Validate, AllgatherReducescatterAlltoallNeedADimension) {
  ExpectRefused(Sub(OpType::kAllgather, {}), 2, "allgather needs at least one dimension");
  ExpectRefused(Sub(OpType::kReducescatter, {}), 2, "reducescatter needs at least one dimension");
  ExpectRefused(Sub(OpType::kAlltoall, {}), 2, "alltoall needs at least one dimension");
}

TEST(Validate, BroadcastRootIsARankOfTheSet) {
  for (int root : {-1, 3, 4}) {
    Submission s = Sub(OpType::kBroadcast, {4});
    s.root = root;
    ExpectRefused(s, 3, "root rank " + std::to_string(root) + " is outside [0, 3)");
  }
  Submission s = Sub(OpType::kBroadcast, {4});
  s.root = 2;
  EXPECT_TRUE(ValidateSubmission(s, 3).ok());
}

TEST(Validate, ReducescatterReducesBySumOrAverage) {
  for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct, ReduceOp::kAdasum}) {
    Submission s = Sub(OpType::kReducescatter, {4});
    s.reduce_op = op;
    ExpectRefused(s, 2, "reduce op " + std::string(ReduceOpName(op)) +
                            " is not supported (only sum and average)");
  }
  Submission s = Sub(OpType::kReducescatter, {4});
  s.reduce_op = ReduceOp::kAverage;
  EXPECT_TRUE(ValidateSubmission(s, 2).ok());
}

TEST(Validate, AlltoallSplits) {
  ExpectRefused(Sub(OpType::kAlltoall, {5}), 2,
                "first dimension 5 is not divisible by 2 ranks (give splits)");
  EXPECT_TRUE(ValidateSubmission(Sub(OpType::kAlltoall, {6}), 3).ok());
  Submission s = Sub(OpType::kAlltoall, {5});
  s.splits = {5};
  ExpectRefused(s, 2, "1 splits for 2 ranks");
  s.splits = {6, -1};
  ExpectRefused(s, 2, "splits [6,-1] has a negative entry or overflows");
  s.splits = {std::numeric_limits<int64_t>::max(), 1};
  ExpectRefused(s, 2, "splits [" + std::to_string(std::numeric_limits<int64_t>::max()) +
                          ",1] has a negative entry or overflows");
  s.splits = {2, 2};
  ExpectRefused(s, 2, "splits [2,2] sum to 4, not the first dimension 5");
  s.splits = {0, 5};
  EXPECT_TRUE(ValidateSubmission(s, 2).ok());
}

TEST(Validate, BarrierCarriesNoData) {
  Submission s = Sub(OpType::kBarrier, {2});
  s.name = std::string(kBarrierPrefix) + "0";
  ExpectRefused(s, 2, "a barrier carries no data");
}

TEST(Validate, AdasumNeedsFloatsAndAPowerOfTwoOfRanks) {
  Submission s = Sub(OpType::kAllreduce, {4}, DataType::kInt32);
  s.reduce_op = ReduceOp::kAdasum;
  ExpectRefused(s, 2,
                "Adasum needs a floating-point tensor (float16, bfloat16, float32 or float64), "
                "not int32");
  s.dtype = DataType::kFloat32;
  ExpectRefused(s, 3,
                "Adasum needs a power-of-two number of ranks (1, 2, 4, 8, ...); this job has 3",
                StatusCode::kUnimplemented);
  EXPECT_TRUE(ValidateSubmission(s, 4).ok());
}

TEST(Validate, ScaleFactorsOfReductions) {
  for (OpType op : {OpType::kAllreduce, OpType::kReducescatter}) {
    SCOPED_TRACE(OpTypeName(op));
    Submission s = Sub(op, {4}, DataType::kBool);
    s.reduce_op = ReduceOp::kAverage;
    ExpectRefused(s, 2, "Average is not defined for bool");
    s = Sub(op, {4});
    s.prescale = std::nan("");
    ExpectRefused(s, 2, "scale factors must be finite");
    s.prescale = 1.0;
    s.postscale = std::numeric_limits<double>::infinity();
    ExpectRefused(s, 2, "scale factors must be finite");
    s = Sub(op, {4}, DataType::kBool);
    s.postscale = 2.0;
    ExpectRefused(s, 2, "scale factors must be 1 for bool");
    s = Sub(op, {4});
    s.prescale = 0.5;
    s.postscale = 3.0;
    EXPECT_TRUE(ValidateSubmission(s, 2).ok());
  }
}

}  // namespace
}  // namespace kolo
