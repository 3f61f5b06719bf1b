// KOLO_FUSION_DIRECT_BYTES=auto through the whole runtime: on one node that shares memory
// (shm, which takes a fused response's tensors in their own buffers) host tensors of any size
// fuse, and the results match the reference computed from every rank's inputs; with an explicit
// direct size, or without a node that shares memory, tensors of that size or more go alone.
// Whether tensors meet in one cycle depends on timing, so the cycles here are 30 ms apart and
// submissions do not start them: a step's four tensors are queued back to back, and fusion must
// show in at least one of three steps (two of a step's tensors in one cycle); where large
// tensors go alone, fused_tensors stays 0 whatever the timing. The executor's tests show that
// a fused group then goes to RunList.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "unit/thread_world.h"
#include "unit/typed_data.h"

namespace kolo {
namespace {

using testing::Load;
using testing::Reference;
using testing::Store;
using testing::Tolerance;
using testing::Value;

// Three steps of four 256 KiB float32 tensors (in place, Average) per rank; returns this
// rank's fused_tensors after checking every result against the reference.
uint64_t RunSteps(Runtime& rt, int ranks) {
  constexpr size_t kCount = 65536;  // 256 KiB: four times the packed direct size
  constexpr int kTensors = 4;
  const int rank = rt.layout().rank;
  for (int step = 0; step < 3; ++step) {
    std::vector<std::vector<char>> bufs;
    std::vector<std::shared_ptr<Handle>> handles;
    for (int k = 0; k < kTensors; ++k) {
      bufs.push_back(testing::Buffer(DataType::kFloat32, kCount));
      for (size_t i = 0; i < kCount; ++i) {
        Store(DataType::kFloat32, bufs.back().data(), i,
              Value(DataType::kFloat32, ReduceOp::kAverage, rank, i + k));
      }
    }
    for (int k = 0; k < kTensors; ++k) {
      auto h = rt.Enqueue(testing::HostAllreduce(
          "grad." + std::to_string(k), bufs[k].data(), bufs[k].data(), DataType::kFloat32,
          {static_cast<int64_t>(kCount)}, ReduceOp::kAverage));
      EXPECT_TRUE(h.ok()) << h.status().ToString();
      if (!h.ok()) return 0;
      handles.push_back(*h);
    }
    for (int k = 0; k < kTensors; ++k) {
      const Status s = testing::WaitFor(*handles[k]);
      EXPECT_TRUE(s.ok()) << s.ToString();
      for (size_t i = 0; i < kCount; ++i) {
        const double want = Reference(DataType::kFloat32, ReduceOp::kAverage, ranks, i + k);
        const double got = Load(DataType::kFloat32, bufs[k].data(), i);
        if (std::fabs(got - want) > Tolerance(DataType::kFloat32, want)) {
          ADD_FAILURE() << "rank " << rank << " step " << step << " tensor " << k << " index " << i
                        << ": got " << got << " want " << want;
          return 0;
        }
      }
    }
  }
  return rt.negotiation_stats().fused_tensors;
}

Config SlowCycles(int64_t direct_bytes) {
  Config c = testing::SlowCycles();
  c.fusion_direct_bytes = direct_bytes;
  return c;
}

class RuntimeListFusionTest : public ::testing::TestWithParam<int> {};

TEST_P(RuntimeListFusionTest, LargeTensorsFuseOnANodeThatSharesMemory) {
  const int ranks = GetParam();
  testing::RunRuntimes(
      ranks, SlowCycles(kFusionDirectAuto),
      [&](Runtime& rt) { EXPECT_GE(RunSteps(rt, ranks), 2u) << "rank " << rt.layout().rank; }, "1");
}

TEST_P(RuntimeListFusionTest, AnExplicitDirectSizeStillHolds) {
  const int ranks = GetParam();
  testing::RunRuntimes(
      ranks, SlowCycles(kFusionDirectPackedBytes),
      [&](Runtime& rt) { EXPECT_EQ(RunSteps(rt, ranks), 0u) << "rank " << rt.layout().rank; }, "1");
}

TEST_P(RuntimeListFusionTest, WithoutSharedMemoryLargeTensorsGoAlone) {
  const int ranks = GetParam();
  testing::RunRuntimes(ranks, SlowCycles(kFusionDirectAuto), [&](Runtime& rt) {
    EXPECT_EQ(RunSteps(rt, ranks), 0u) << "rank " << rt.layout().rank;
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, RuntimeListFusionTest, ::testing::Values(2, 3));

}  // namespace
}  // namespace kolo
