// The arithmetic behind the device path's NCCL calls (collectives/nccl/nccl_plan.h), checked
// without a GPU: part offsets, when allgather needs the grouped-broadcast form, and the padded
// layout that lets ncclReduceScatter take Horovod's unequal row split — every element of every
// part lands in its rank's slot, nothing overlaps, and the slot holds the largest part.
#include <gtest/gtest.h>

#include <vector>

#include "collectives/nccl/nccl_plan.h"
#include "collectives/nccl/nccl_supports.h"
#include "kolo/config.h"
#include "runtime/operations.h"
#if KOLO_WITH_CUDA && KOLO_WITH_NCCL
#include "collectives/nccl/nccl_lib.h"
#endif

namespace kolo {
namespace {

// What the selector and the submission checks believe NCCL can reduce is what the NCCL calls
// can map: one table, NcclSupports.
TEST(NcclSupports, AgreesWithTheNcclTypeAndOpMappings) {
  for (int d = 0; d <= static_cast<int>(DataType::kBFloat16); ++d) {
    const DataType dtype = static_cast<DataType>(d);
    for (ReduceOp op : {ReduceOp::kAverage, ReduceOp::kSum, ReduceOp::kAdasum, ReduceOp::kMin,
                        ReduceOp::kMax, ReduceOp::kProduct}) {
      const std::string why = NcclSupports(dtype, op);
      const bool small_int_or_bool = dtype == DataType::kInt16 || dtype == DataType::kUInt16 ||
                                     dtype == DataType::kBool;
      const bool nccl_op = op == ReduceOp::kSum || op == ReduceOp::kMin ||
                           op == ReduceOp::kMax || op == ReduceOp::kProduct;
      EXPECT_EQ(why.empty(), !small_int_or_bool && nccl_op) << DataTypeName(dtype) << " " << why;
#if KOLO_WITH_CUDA && KOLO_WITH_NCCL
      ncclDataType_t t;
      ncclRedOp_t o;
      EXPECT_EQ(why.empty(), NcclDataType(dtype, &t) && NcclRedOp(op, &o))
          << DataTypeName(dtype) << " " << ReduceOpName(op);
#endif
    }
  }
  EXPECT_EQ(NcclSupports(DataType::kInt16, ReduceOp::kSum), "NCCL has no int16");
}

TEST(NcclPlan, PartOffsetsArePrefixSums) {
  EXPECT_EQ(PartOffsets({}), std::vector<size_t>({0}));
  EXPECT_EQ(PartOffsets({5}), std::vector<size_t>({0, 5}));
  EXPECT_EQ(PartOffsets({3, 0, 4, 1}), std::vector<size_t>({0, 3, 3, 7, 8}));
}

TEST(NcclPlan, EqualParts) {
  EXPECT_TRUE(EqualParts({}));
  EXPECT_TRUE(EqualParts({7}));
  EXPECT_TRUE(EqualParts({4, 4, 4}));
  EXPECT_TRUE(EqualParts({0, 0}));
  EXPECT_FALSE(EqualParts({4, 4, 3}));  // allgather then broadcasts per rank
  EXPECT_FALSE(EqualParts({0, 1}));
}

TEST(NcclPlan, EqualReducescatterIsNotStaged) {
  const ReducescatterPlan plan = PlanReducescatter({6, 6, 6});
  EXPECT_FALSE(plan.staged);
  EXPECT_EQ(plan.padded, 6u);
  EXPECT_EQ(plan.offsets, std::vector<size_t>({0, 6, 12}));
}

// Horovod's split of n rows over p ranks, times a row of r elements, for many n, p and r: the
// staged layout holds every input element exactly once, in its owner's slot, in order.
TEST(NcclPlan, UnequalReducescatterPadsEveryPartIntoItsSlot) {
  for (int p : {1, 2, 3, 4, 7}) {
    for (int64_t n : {0, 1, 2, 5, 9, 10, 33}) {
      for (size_t row : {size_t{1}, size_t{3}}) {
        SCOPED_TRACE("p=" + std::to_string(p) + " n=" + std::to_string(n) +
                     " row=" + std::to_string(row));
        std::vector<size_t> counts;
        size_t total = 0;
        for (int r = 0; r < p; ++r) {
          counts.push_back(static_cast<size_t>(ReducescatterShare(n, r, p)) * row);
          total += counts.back();
        }
        ASSERT_EQ(total, static_cast<size_t>(n) * row);
        const ReducescatterPlan plan = PlanReducescatter(counts);
        EXPECT_EQ(plan.staged, n % p != 0);
        // The slot is the largest part: at most one row more than the smallest.
        EXPECT_EQ(plan.padded, static_cast<size_t>((n + p - 1) / p) * row);
        std::vector<int> owner(static_cast<size_t>(p) * plan.padded, -1);
        size_t next_input = 0;
        for (int r = 0; r < p; ++r) {
          ASSERT_EQ(plan.offsets[r], next_input) << "part " << r << " starts where r-1 ended";
          for (size_t i = 0; i < counts[r]; ++i) {
            const size_t at = plan.Slot(r) + i;
            ASSERT_LT(at, owner.size());
            ASSERT_EQ(owner[at], -1) << "two elements staged at " << at;
            owner[at] = r;
          }
          next_input += counts[r];
          // What NCCL hands rank r (its slot) begins with its part: no shift.
          EXPECT_EQ(plan.Slot(r), static_cast<size_t>(r) * plan.padded);
        }
        size_t staged = 0;
        for (int o : owner) staged += o >= 0;
        EXPECT_EQ(staged, total);
      }
    }
  }
}

}  // namespace
}  // namespace kolo
