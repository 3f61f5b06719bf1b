// collectives/cuda/device.h's pure parts, which hold without a GPU: the stream a CUDA tensor's
// ready event is recorded on when the caller names none, and the message for a driver too old
// for kolo's CUDA runtime.
#include "collectives/cuda/device.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "kolo/config.h"

#if KOLO_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace kolo {
namespace {

// kolo.torch passes torch's current stream, which is 0 on torch's default stream: that must
// still order kolo after the writer (CUDA's legacy stream), not mean "no stream".
TEST(CudaDevice, NoStreamMeansTheLegacyDefaultStream) {
  EXPECT_EQ(ReadyStreamOrLegacy(nullptr), reinterpret_cast<void*>(uintptr_t{1}));
#if KOLO_WITH_CUDA
  EXPECT_EQ(ReadyStreamOrLegacy(nullptr), static_cast<void*>(cudaStreamLegacy));
#endif
  int dummy = 0;
  EXPECT_EQ(ReadyStreamOrLegacy(&dummy), &dummy);
}

// Without such a device the event is not recorded (the execution reports the device), so a
// CUDA tensor submitted on a machine without a GPU is not refused at submission.
TEST(CudaDevice, NoEventWithoutTheDevice) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  auto ev = RecordReadyEvent(0, nullptr);
  ASSERT_TRUE(ev.ok()) << ev.status().ToString();
  EXPECT_EQ(*ev, nullptr);
}

TEST(CudaDevice, AnOldDriverIsNamedWithTheReleaseTheRuntimeNeeds) {
  EXPECT_EQ(InsufficientDriverReason(12020, 13000),
            "the NVIDIA driver supports CUDA up to 12.2, but kolo's CUDA runtime is 13.0, linked "
            "statically: it needs an NVIDIA driver of release 580 or newer");
  EXPECT_EQ(InsufficientDriverReason(0, 12040),
            "no NVIDIA driver is installed; kolo's CUDA runtime is 12.4, linked statically: it "
            "needs an NVIDIA driver of release 525 or newer");
}

}  // namespace
}  // namespace kolo
