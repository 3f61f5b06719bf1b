// The background thread's idle back-off (runtime/runtime.cc): Runtimes in the thread world that
// have nothing in flight stretch their cycles (up to 20 ms) instead of negotiating every cycle
// time, and an operation submitted after the pause still completes, with the right values, on
// every rank. The bound on cycles is an upper one: a slower machine (or a sanitizer) only makes
// fewer cycles.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "unit/thread_world.h"

namespace kolo {
namespace {

using testing::RunRuntimes;
using testing::WaitFor;

// Every rank contributes rank + 1 + i at index i; the sum over `ranks` ranks is the reference.
void AllreduceAndCheck(Runtime& rt, const std::string& name, int ranks) {
  const int rank = rt.layout().rank;
  std::vector<float> in(64), out(64, -1.0f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(rank + 1 + i);
  auto h = rt.Enqueue(testing::HostAllreduce(name, in.data(), out.data(), DataType::kFloat32,
                                             {static_cast<int64_t>(in.size())}, ReduceOp::kSum));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  Status s = WaitFor(**h);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (size_t i = 0; i < out.size(); ++i) {
    const double want = ranks * (ranks + 1) / 2.0 + ranks * static_cast<double>(i);
    ASSERT_EQ(out[i], static_cast<float>(want)) << name << " rank " << rank << " index " << i;
  }
}

TEST(IdleBackOff, AnIdleRuntimeStretchesItsCyclesAndTheNextOperationStillCompletes) {
  constexpr int kRanks = 3;
  Config config;
  config.cycle_time_ms = 1;  // a fixed cycle would run ~400 cycles in the pause below
  config.wake_on_submit = true;
  config.autotune = false;
  RunRuntimes(kRanks, config, [&](Runtime& rt) {
    AllreduceAndCheck(rt, "before", kRanks);
    const uint64_t before = rt.negotiation_stats().cycles;
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    const uint64_t during = rt.negotiation_stats().cycles - before;
    // Backing off from 1 ms to 20 ms: about 2 + 5 + 400 / 20 = 27 cycles.
    EXPECT_LT(during, 120u) << "rank " << rt.layout().rank << ": " << during
                            << " cycles in 400 ms idle at a 1 ms cycle time";
    AllreduceAndCheck(rt, "after", kRanks);
  });
}

}  // namespace
}  // namespace kolo
