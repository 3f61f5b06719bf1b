// The runtime's handling of CUDA tensors where no GPU is needed to check it (issue 7): ranks
// that disagree on where a tensor lives get a clear error naming it and the ranks; CUDA tensors
// on a machine without the device fail on every rank instead of hanging; operations without a
// device path refuse CUDA tensors at once and their peers learn of it; host pointers are host
// memory. The device path itself runs under the `gpu` label (tests/gpu/).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "collectives/cuda/device.h"
#include "unit/thread_world.h"

namespace kolo {
namespace {

using testing::FastConfig;
using testing::RunRuntimes;
using testing::WaitFor;

Submission Allreduce(const std::string& name, const void* in, void* out, int device) {
  Submission s;
  s.op = OpType::kAllreduce;
  s.name = name;
  s.input = in;
  s.output = out;
  s.dtype = DataType::kFloat32;
  s.shape = {4};
  s.reduce_op = ReduceOp::kSum;
  s.device = device;
  return s;
}

bool Has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(RuntimeDevice, HostAndDeviceMismatchNamesTheTensorAndRanks) {
  RunRuntimes(3, FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    std::vector<float> in(4, 1.0f), out(4);
    auto h = rt.Enqueue(Allreduce("grad/w", in.data(), out.data(), rank == 1 ? 0 : -1));
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    const Status s = WaitFor(**h);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_TRUE(Has(s.message(), "allreduce 'grad/w'")) << s.message();
    EXPECT_TRUE(Has(s.message(), "device mismatch")) << s.message();
    EXPECT_TRUE(Has(s.message(), "rank 1")) << s.message();
    // The runtime goes on: a host all-reduce afterwards works.
    std::vector<float> a(4, 2.0f), b(4);
    auto h2 = rt.Enqueue(Allreduce("after", a.data(), b.data(), -1));
    ASSERT_TRUE(h2.ok());
    ASSERT_TRUE(WaitFor(**h2).ok());
    EXPECT_EQ(b[0], 6.0f);
  });
}

// Every rank says cuda:0 but there is no such device (CI, or a build without CUDA): the
// all-reduce fails on every rank with the reason; nothing hangs, and the next one works.
TEST(RuntimeDevice, DeviceTensorsWithoutADeviceFailEverywhere) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  RunRuntimes(2, FastConfig(), [&](Runtime& rt) {
    std::vector<float> in(4, 1.0f), out(4);
    auto h = rt.Enqueue(Allreduce("on_gpu", in.data(), out.data(), 0));
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    const Status s = WaitFor(**h);
    EXPECT_FALSE(s.ok());
    EXPECT_TRUE(Has(s.message(), "allreduce 'on_gpu'")) << s.message();
    EXPECT_TRUE(Has(s.message(), "cuda:0")) << s.message();
    std::vector<float> a(4, 1.0f), b(4);
    auto h2 = rt.Enqueue(Allreduce("host_after", a.data(), b.data(), -1));
    ASSERT_TRUE(h2.ok());
    EXPECT_TRUE(WaitFor(**h2).ok());
  });
}

// Allgather has no device path yet: refused at submission; its peers fail with the reason.
TEST(RuntimeDevice, OperationsWithoutADevicePathRefuseCudaTensors) {
  RunRuntimes(2, FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    std::vector<float> in(4, 1.0f);
    Submission g;
    g.op = OpType::kAllgather;
    g.name = "gathered";
    g.input = in.data();
    g.dtype = DataType::kFloat32;
    g.shape = {4};
    g.device = rank == 0 ? 0 : -1;
    auto h = rt.Enqueue(g);
    if (rank == 0) {
      ASSERT_FALSE(h.ok());
      EXPECT_EQ(h.status().code(), StatusCode::kUnimplemented);
      EXPECT_TRUE(Has(h.status().message(), "allreduce and broadcast only")) << h.status().message();
    } else {
      ASSERT_TRUE(h.ok());
      const Status s = WaitFor(**h);
      EXPECT_FALSE(s.ok());
      EXPECT_TRUE(Has(s.message(), "rank 0")) << s.message();
    }
  });
}

// Pointers kolo is given without a device are classified: host memory is host memory, so the
// ordinary path runs (kDetectDevice is what the C API passes).
TEST(RuntimeDevice, DetectedHostPointersTakeTheHostPath) {
  RunRuntimes(2, FastConfig(), [&](Runtime& rt) {
    std::vector<float> in(4, 1.5f), out(4);
    auto h = rt.Enqueue(Allreduce("detected", in.data(), out.data(), kDetectDevice));
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    ASSERT_TRUE(WaitFor(**h).ok());
    EXPECT_EQ(out[3], 3.0f);
  });
}

// CUDA-tensor Responses complete through the finaliser (runtime/finaliser.h), failures
// included. Without a device every one fails, with the operation and device named; a broadcast
// too. Then a burst of device and host operations is submitted and the runtime is shut down
// at once, without waiting: Shutdown must complete every handle (none lost, none hanging).
TEST(RuntimeDevice, DeviceHandlesCompleteThroughTheFinaliserAndShutdownLosesNone) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  constexpr int kRanks = 2;
  constexpr int kBurst = 40;
  std::vector<std::vector<std::shared_ptr<Handle>>> burst(kRanks);
  std::vector<std::vector<float>> buffers(kRanks * (2 * kBurst + 1), std::vector<float>(4, 1.0f));
  RunRuntimes(kRanks, FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    std::vector<float>& data = buffers[rank * (2 * kBurst + 1)];
    Submission b;
    b.op = OpType::kBroadcast;
    b.name = "bcast_on_gpu";
    b.input = data.data();
    b.output = data.data();
    b.dtype = DataType::kFloat32;
    b.shape = {4};
    b.root = 0;
    b.device = 0;
    auto hb = rt.Enqueue(b);
    ASSERT_TRUE(hb.ok()) << hb.status().ToString();
    const Status sb = WaitFor(**hb);
    EXPECT_FALSE(sb.ok());
    EXPECT_TRUE(Has(sb.message(), "broadcast 'bcast_on_gpu'")) << sb.message();
    EXPECT_TRUE(Has(sb.message(), "cuda:0")) << sb.message();
    for (int i = 0; i < kBurst; ++i) {
      std::vector<float>& dev = buffers[rank * (2 * kBurst + 1) + 1 + 2 * i];
      std::vector<float>& host = buffers[rank * (2 * kBurst + 1) + 2 + 2 * i];
      auto hd = rt.Enqueue(Allreduce("dev" + std::to_string(i), dev.data(), dev.data(), 0));
      auto hh = rt.Enqueue(Allreduce("host" + std::to_string(i), host.data(), host.data(), -1));
      ASSERT_TRUE(hd.ok()) << hd.status().ToString();
      ASSERT_TRUE(hh.ok()) << hh.status().ToString();
      burst[rank].push_back(*hd);
      burst[rank].push_back(*hh);
    }
    // Returning shuts every runtime down with the burst in flight.
  });
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(burst[r].size(), 2u * kBurst);
    for (size_t i = 0; i < burst[r].size(); ++i) {
      ASSERT_TRUE(burst[r][i]->Poll()) << "rank " << r << ": handle " << i
                                       << " not completed by Shutdown";
      // Device all-reduces fail (no device, or shut down before they ran), never succeed.
      if (i % 2 == 0) {
        EXPECT_FALSE(burst[r][i]->status().ok()) << "rank " << r << ": handle " << i;
      }
    }
  }
}

}  // namespace
}  // namespace kolo
