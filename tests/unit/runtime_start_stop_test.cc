// Starting and stopping a runtime on a thread world.
//
// A collective that fails in a way that leaves the ranks out of step (here kUnavailable: the
// data plane is gone) stops the runtime at once (Runtime::NoteOutOfStep): the Responses
// negotiated with it do not run, and they and every later submission fail with "kolo stopped"
// and the first failure's reason. Going on would run each later collective against a peer that
// is gone, or one still inside the collective that failed. The thread world's data world is
// aborted while its control world still works, so the negotiation goes on and only this rule
// stops the runtime. The two tensors differ in dtype, so they never fuse; with testing::
// SlowCycles they are usually negotiated together (either way, the one that runs second must
// not run).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "unit/thread_world.h"

namespace kolo {
namespace {

constexpr char kLostDataPlane[] = "the data plane is gone (aborted by the test)";

// The outcome of a submission: the refusal, or what its handle completed with.
Status OutcomeOf(const StatusOr<std::shared_ptr<Handle>>& h) {
  return h.ok() ? testing::WaitFor(**h) : h.status();
}

bool IsKoloStopped(const Status& s) {
  return s.code() == StatusCode::kFailedPrecondition &&
         s.message().find("kolo stopped") != std::string::npos &&
         s.message().find(kLostDataPlane) != std::string::npos;
}

// Starts `ranks` runtimes, aborts their data world, runs fn(runtime) on one thread per rank,
// then shuts them down.
void RunOnALostDataPlane(int ranks, const std::function<void(Runtime&)>& fn) {
  std::shared_ptr<LoopbackWorld> data;
  auto runtimes = testing::StartRuntimes(ranks, testing::SlowCycles(), "", &data);
  ASSERT_EQ(runtimes.size(), static_cast<size_t>(ranks));
  data->Abort(kLostDataPlane);
  std::vector<std::thread> threads;
  for (auto& rt : runtimes) threads.emplace_back([&fn, &rt] { fn(*rt); });
  for (auto& t : threads) t.join();
  for (auto& rt : runtimes) rt->Shutdown();
}

class RuntimeOutOfStepTest : public ::testing::TestWithParam<int> {};

TEST_P(RuntimeOutOfStepTest, ALostDataPlaneStopsTheRuntimeBeforeTheNextResponse) {
  RunOnALostDataPlane(GetParam(), [](Runtime& rt) {
    const int r = rt.layout().rank;
    std::vector<float> x(8, 1.0f);
    std::vector<int32_t> y(8, 1);
    auto hx = rt.Enqueue(testing::FloatSum("x", x.data(), x.data(), 8));
    auto hy = rt.Enqueue(
        testing::HostAllreduce("y", y.data(), y.data(), DataType::kInt32, {8}, ReduceOp::kSum));
    const Status sx = OutcomeOf(hx), sy = OutcomeOf(hy);
    // One of them ran and met the lost data plane; the other must not have run.
    const Status& ran = IsKoloStopped(sx) ? sy : sx;
    const Status& other = IsKoloStopped(sx) ? sx : sy;
    EXPECT_EQ(ran.code(), StatusCode::kUnavailable) << "rank " << r << ": " << ran.ToString();
    EXPECT_NE(ran.message().find(kLostDataPlane), std::string::npos) << ran.ToString();
    EXPECT_TRUE(IsKoloStopped(other)) << "rank " << r << ": the other tensor: " << other.ToString();
    // And nothing runs after it.
    std::vector<float> z(8, 1.0f);
    const Status sz = OutcomeOf(rt.Enqueue(testing::FloatSum("z", z.data(), z.data(), 8)));
    EXPECT_TRUE(IsKoloStopped(sz)) << "rank " << r << ": a later submission: " << sz.ToString();
    EXPECT_EQ(z[0], 1.0f);  // never reduced
  });
}

// A fused group that fails: each handle's error names its own tensor and the group (a grouped
// submission is negotiated and fused as one), so a caller waiting on any tensor of a step's
// gradients reads which one it was.
TEST_P(RuntimeOutOfStepTest, EachTensorOfAFailedFusedGroupIsNamedInItsOwnError) {
  RunOnALostDataPlane(GetParam(), [](Runtime& rt) {
    const int r = rt.layout().rank;
    const std::vector<std::string> names = {"grad.fc", "grad.conv1", "grad.bn1"};
    std::vector<std::vector<float>> bufs(names.size(), std::vector<float>(16, 1.0f));
    std::vector<Submission> group;
    for (size_t k = 0; k < names.size(); ++k) {
      group.push_back(testing::FloatSum(names[k], bufs[k].data(), bufs[k].data(), 16));
    }
    auto handles = rt.EnqueueGroup(group);
    ASSERT_TRUE(handles.ok()) << handles.status().ToString();
    for (size_t k = 0; k < names.size(); ++k) {
      const Status s = testing::WaitFor(*(*handles)[k]);
      const std::string own = "allreduce '" + names[k] + "' (fused with 2 more, 192 bytes in all)";
      EXPECT_EQ(s.code(), StatusCode::kUnavailable) << "rank " << r << ": " << s.ToString();
      EXPECT_EQ(s.message().rfind(own, 0), 0u) << "rank " << r << ": " << s.message();
      EXPECT_NE(s.message().find(kLostDataPlane), std::string::npos) << s.message();
    }
  });
}

// A forced all-reduce algorithm no build has is a malformed setting, refused at the start as
// the other *_ALGO settings' are (kInvalidArgument), with the names there are.
TEST(RuntimeStartTest, AnUnknownAllreduceAlgorithmIsAnInvalidSetting) {
  auto control = std::make_shared<LoopbackWorld>(1, std::chrono::seconds(5));
  auto data = std::make_shared<LoopbackWorld>(1, std::chrono::seconds(5));
  Config config;
  config.allreduce_algo = "ringg";
  Runtime rt(config, RankLayout{}, std::make_unique<LoopbackCommunicator>(control, 0),
             std::make_unique<LoopbackCommunicator>(data, 0));
  const Status s = rt.Start();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("KOLO_ALLREDUCE_ALGO=ringg: no such all-reduce algorithm"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("ring"), std::string::npos) << s.message();
}

INSTANTIATE_TEST_SUITE_P(Ranks, RuntimeOutOfStepTest, ::testing::Values(2, 3));

}  // namespace
}  // namespace kolo
