// kolo-bench's choice of run from --device, --model, --negotiation and --paths (bench/mode.h):
// every combination is checked before MPI or a GPU is touched, so a bad one is a clear usage
// error on any machine. The run itself without a GPU ("no CUDA device here", non-zero exit) is
// the ctest entries bench.device_model.* (tests/mpi/CMakeLists.txt).
#include "bench/mode.h"
#include "tests/unit/has_text.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kolo::bench {
namespace {

using kolo::testing::Has;

ModeFlags Flags(const std::string& device, const std::string& model, const std::string& paths = "") {
  ModeFlags f;
  f.device = device;
  f.model = model;
  f.paths = paths;
  return f;
}

TEST(BenchMode, DeviceModelReplayRunsKoloAndBothRawNcclPaths) {
  Mode mode;
  ASSERT_EQ(ChooseMode(Flags("cuda", "resnet50"), &mode), "");
  EXPECT_TRUE(mode.on_device);
  EXPECT_TRUE(mode.replay);
  EXPECT_EQ(mode.model.name, "resnet50");
  EXPECT_EQ(mode.model.tensors.size(), 161u);
  EXPECT_EQ(mode.paths, (std::vector<std::string>{"kolo", "nccl-per-tensor", "nccl-fused"}));
}

TEST(BenchMode, HostModesKeepTheirPaths) {
  Mode mode;
  ASSERT_EQ(ChooseMode(Flags("host", "bert-base"), &mode), "");
  EXPECT_FALSE(mode.on_device);
  EXPECT_EQ(mode.paths,
            (std::vector<std::string>{"kolo", "mpi-per-tensor", "mpi-fused", "memcpy"}));
  ASSERT_EQ(ChooseMode(Flags("host", ""), &mode), "");
  EXPECT_FALSE(mode.replay);
  EXPECT_EQ(mode.paths, (std::vector<std::string>{"mpi", "kolo"}));
  ASSERT_EQ(ChooseMode(Flags("cuda", ""), &mode), "");
  EXPECT_EQ(mode.paths, (std::vector<std::string>{"nccl", "kolo"}));
}

TEST(BenchMode, UnknownModelOnTheDeviceNamesTheKnownOnes) {
  Mode mode;
  const std::string error = ChooseMode(Flags("cuda", "resnet5O"), &mode);
  EXPECT_TRUE(Has(error, "unknown --model 'resnet5O'")) << error;
  for (const std::string& m : ModelNames()) EXPECT_TRUE(Has(error, m)) << error;
}

TEST(BenchMode, PathsAreCheckedAgainstTheMode) {
  Mode mode;
  ASSERT_EQ(ChooseMode(Flags("cuda", "tiny-1000", "nccl-fused,kolo"), &mode), "");
  EXPECT_EQ(mode.paths, (std::vector<std::string>{"nccl-fused", "kolo"}));
  // The host replay's MPI paths do not exist on the device, and the other way round.
  std::string error = ChooseMode(Flags("cuda", "resnet50", "kolo,mpi-fused"), &mode);
  EXPECT_TRUE(Has(error, "bad --paths entry 'mpi-fused'")) << error;
  EXPECT_TRUE(Has(error, "kolo,nccl-per-tensor,nccl-fused")) << error;
  error = ChooseMode(Flags("host", "resnet50", "nccl-fused"), &mode);
  EXPECT_TRUE(Has(error, "bad --paths entry 'nccl-fused'")) << error;
  error = ChooseMode(Flags("cuda", "resnet50", "kolo,kolo"), &mode);
  EXPECT_TRUE(Has(error, "bad --paths entry 'kolo'")) << error;
  error = ChooseMode(Flags("cuda", "resnet50", ","), &mode);
  EXPECT_TRUE(Has(error, "--paths is empty")) << error;
}

TEST(BenchMode, DeviceRefusesWhatItCannotRun) {
  Mode mode;
  ModeFlags negotiation = Flags("cuda", "");
  negotiation.negotiation = true;
  EXPECT_TRUE(Has(ChooseMode(negotiation, &mode), "--negotiation")) << ChooseMode(negotiation, &mode);
  const std::string error = ChooseMode(Flags("cuda", "", "kolo"), &mode);
  EXPECT_TRUE(Has(error, "--device cuda runs both sweep paths")) << error;
}

}  // namespace
}  // namespace kolo::bench
