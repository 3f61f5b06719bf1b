// LowerReduce (collectives/reduce.h): the one rule every all-reduce and reduce-scatter path uses
// for Average. Checked two ways: the fields against the definition (Average = Sum over `size`
// ranks, then divide by `size`), and end to end, reducing known per-rank values with the lowered
// op and finishing them as the host paths do, against the average computed in float64.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "collectives/reduce.h"

namespace kolo {
namespace {

const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct,
                         ReduceOp::kAverage, ReduceOp::kAdasum};

TEST(LowerReduce, AverageIsSumThenDivisionByTheRanksOtherOpsPassThrough) {
  for (ReduceOp op : kOps) {
    for (int size : {1, 2, 3, 7}) {
      for (double postscale : {1.0, 0.5, 3.0}) {
        const LoweredReduce l = LowerReduce(op, postscale, size);
        const bool average = op == ReduceOp::kAverage;
        SCOPED_TRACE(std::string(ReduceOpName(op)) + " size " + std::to_string(size) +
                     " postscale " + std::to_string(postscale));
        EXPECT_EQ(l.wire_op, average ? ReduceOp::kSum : op);
        EXPECT_DOUBLE_EQ(l.float_postscale, average ? postscale / size : postscale);
        EXPECT_EQ(l.integer_divisor, average ? size : 1);
        EXPECT_DOUBLE_EQ(l.integer_postscale, postscale);
      }
    }
  }
}

// Rank r holds r * 7 + 5 + i at element i: sums that do not divide evenly by most sizes.
TEST(LowerReduce, IntegerAndFloatAveragesMatchTheFloat64Reference) {
  constexpr size_t kCount = 9;
  for (int size : {1, 2, 3, 4}) {
    for (double postscale : {1.0, 2.0}) {
      const LoweredReduce l = LowerReduce(ReduceOp::kAverage, postscale, size);
      std::vector<int32_t> isum(kCount, 0);
      std::vector<float> fsum(kCount, 0.f);
      for (int r = 0; r < size; ++r) {
        std::vector<int32_t> in(kCount);
        std::vector<float> fin(kCount);
        for (size_t i = 0; i < kCount; ++i) {
          in[i] = r * 7 + 5 + static_cast<int32_t>(i);
          fin[i] = static_cast<float>(in[i]);
        }
        ASSERT_TRUE(ReduceInto(isum.data(), in.data(), kCount, DataType::kInt32, l.wire_op).ok());
        ASSERT_TRUE(
            ReduceInto(fsum.data(), fin.data(), kCount, DataType::kFloat32, l.wire_op).ok());
      }
      std::vector<int32_t> iout(kCount);
      ASSERT_TRUE(DivideCopy(iout.data(), isum.data(), kCount, DataType::kInt32,
                             l.integer_divisor).ok());
      ASSERT_TRUE(ScaleCopy(iout.data(), iout.data(), kCount, DataType::kInt32,
                            l.integer_postscale).ok());
      std::vector<float> fout(kCount);
      ASSERT_TRUE(ScaleCopy(fout.data(), fsum.data(), kCount, DataType::kFloat32,
                            l.float_postscale).ok());
      for (size_t i = 0; i < kCount; ++i) {
        double sum = 0;
        for (int r = 0; r < size; ++r) sum += r * 7 + 5 + static_cast<double>(i);
        // Integers: C's truncating division, then the scale (truncated toward zero).
        EXPECT_EQ(iout[i], static_cast<int32_t>(std::trunc(std::trunc(sum / size) * postscale)))
            << "size " << size << " element " << i;
        EXPECT_FLOAT_EQ(fout[i], static_cast<float>(sum / size * postscale))
            << "size " << size << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace kolo
