// kolo-scale's step model: which gradients each all-reduce takes and when the step ends, against
// hand-worked examples (the arithmetic written out in each test).
#include "bench/scale_model.h"

#include <gtest/gtest.h>

#include <vector>

namespace kolo::bench {
namespace {

// Four tensors of 1, 2, 4 and 8 KiB (float32), registered in that order, so backward order is
// 8, 4, 2, 1 KiB.
ModelLayout Toy() {
  return ModelLayout{"toy", "toy", {{"a", {256}}, {"b", {512}}, {"c", {1024}}, {"d", {2048}}}};
}

// compute 12 ms, backward 2/3: forward 4 ms, backward 8 ms; the tensors are ready 6, 8, 10 and
// 12 ms into the step.
StepAssumptions Twelve() {
  StepAssumptions a;
  a.compute_ms = 12;
  a.backward_share = 2.0 / 3.0;
  return a;
}

double OneUsPerByte(size_t bytes) { return static_cast<double>(bytes); }

TEST(ScaleModelTest, EachAllreduceTakesWhatIsReadyWhenTheLastEnds) {
  // 8 KiB at 6 ms takes 8.192 ms: ends 14.192, by when 4, 2 and 1 KiB are ready: one buffer of
  // 7 KiB, 7.168 ms, ends 21.36.
  const StepPrediction p = PredictStep(Toy(), Twelve(), OneUsPerByte);
  ASSERT_EQ(p.allreduces.size(), 2u);
  EXPECT_EQ(p.allreduces[0].bytes, 8192u);
  EXPECT_EQ(p.allreduces[0].tensors, 1);
  EXPECT_NEAR(p.allreduces[0].start_ms, 6.0, 1e-9);
  EXPECT_EQ(p.allreduces[1].bytes, 7168u);
  EXPECT_EQ(p.allreduces[1].tensors, 3);
  EXPECT_NEAR(p.allreduces[1].start_ms, 14.192, 1e-9);
  EXPECT_NEAR(p.allreduce_ms, 15.36, 1e-9);
  EXPECT_NEAR(p.step_ms, 21.36, 1e-9);
  EXPECT_NEAR(p.efficiency, 12.0 / 21.36, 1e-12);
  // After backward: one 15 KiB buffer, 15.36 ms.
  EXPECT_EQ(p.after_allreduces, 1);
  EXPECT_NEAR(p.after_step_ms, 27.36, 1e-9);
  EXPECT_NEAR(p.after_efficiency, 12.0 / 27.36, 1e-12);
}

TEST(ScaleModelTest, FastAllreducesHideBehindBackward) {
  // 0.1 ms each: every one ends before the next tensor is ready, so each goes alone; the last
  // (ready at 12) ends at 12.1.
  const StepPrediction p = PredictStep(Toy(), Twelve(), [](size_t) { return 100.0; });
  ASSERT_EQ(p.allreduces.size(), 4u);
  const double start[] = {6, 8, 10, 12};
  for (size_t k = 0; k < 4; ++k) EXPECT_NEAR(p.allreduces[k].start_ms, start[k], 1e-9) << k;
  EXPECT_NEAR(p.step_ms, 12.1, 1e-9);
  EXPECT_NEAR(p.after_step_ms, 12.1, 1e-9);  // one buffer after backward: the same 0.1 ms
  // Nothing to move (one rank): the step is the compute alone.
  const StepPrediction none = PredictStep(Toy(), Twelve(), [](size_t) { return 0.0; });
  EXPECT_DOUBLE_EQ(none.efficiency, 1.0);
  EXPECT_DOUBLE_EQ(none.after_efficiency, 1.0);
}

TEST(ScaleModelTest, CyclesDelayWhatTheRuntimeSees) {
  StepAssumptions a = Twelve();
  a.cycle_ms = 5;  // ready 2, 4, 6, 8 ms into backward: seen at 5, 5, 10, 10 -> 9, 9, 14, 14
  const StepPrediction p = PredictStep(Toy(), a, [](size_t) { return 100.0; });
  ASSERT_EQ(p.allreduces.size(), 2u);
  EXPECT_EQ(p.allreduces[0].bytes, 12288u);
  EXPECT_NEAR(p.allreduces[0].start_ms, 9.0, 1e-9);
  EXPECT_EQ(p.allreduces[1].bytes, 3072u);
  EXPECT_NEAR(p.allreduces[1].start_ms, 14.0, 1e-9);
  EXPECT_NEAR(p.step_ms, 14.1, 1e-9);
}

TEST(ScaleModelTest, TheFusionThresholdSplitsBuffers) {
  StepAssumptions a = Twelve();
  a.fusion_threshold_bytes = 6144;  // 8 KiB alone (larger than it); 4 + 2 KiB; 1 KiB
  const StepPrediction p = PredictStep(Toy(), a, OneUsPerByte);
  // Overlapped: 8 KiB 6 -> 14.192; 4 + 2 KiB 14.192 -> 20.336; 1 KiB -> 21.36.
  ASSERT_EQ(p.allreduces.size(), 3u);
  EXPECT_EQ(p.allreduces[1].bytes, 6144u);
  EXPECT_EQ(p.allreduces[2].bytes, 1024u);
  EXPECT_NEAR(p.step_ms, 21.36, 1e-9);
  EXPECT_EQ(p.after_allreduces, 3);
}

}  // namespace
}  // namespace kolo::bench
