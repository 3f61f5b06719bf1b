// The runtime's handling of CUDA tensors where no GPU is needed to check it (issue 7): ranks
// that disagree on where a tensor lives get a clear error naming it and the ranks; CUDA tensors
// on a machine without the device fail on every rank instead of hanging (every operation, and
// a joined rank's zeros); reductions the device path cannot do (dtypes NCCL lacks, integer
// Average) are refused at once and their peers learn of it; host pointers are host memory. The
// device path itself runs under the `gpu` label (tests/gpu/).
#include <gtest/gtest.h>

#include <cstdint>
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

Submission OnDevice(OpType op, const std::string& name, const void* in, DataType dtype,
                    int device) {
  Submission s;
  s.op = op;
  s.name = name;
  s.input = in;
  s.dtype = dtype;
  s.shape = {4};
  s.reduce_op = ReduceOp::kSum;
  s.device = device;
  return s;
}

// Allgather, alltoall and reducescatter of tensors said to be on cuda:0, where this process
// has no such device (no GPU here, or a build without CUDA): every rank fails with a message
// naming the operation, the tensor and the device — no crash, no hang, no fake result — and
// the runtime goes on.
TEST(RuntimeDevice, CollectivesOfCudaTensorsWithoutADeviceFailEverywhere) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  RunRuntimes(2, FastConfig(), [&](Runtime& rt) {
    std::vector<float> in(4, 1.0f);
    for (OpType op : {OpType::kAllgather, OpType::kAlltoall, OpType::kReducescatter}) {
      const std::string name = "dev_" + std::string(OpTypeName(op));
      auto h = rt.Enqueue(OnDevice(op, name, in.data(), DataType::kFloat32, 0));
      ASSERT_TRUE(h.ok()) << h.status().ToString();
      const Status s = WaitFor(**h);
      EXPECT_FALSE(s.ok()) << name;
      EXPECT_TRUE(Has(s.message(), std::string(OpTypeName(op)) + " '" + name + "'"))
          << s.message();
      EXPECT_TRUE(Has(s.message(), "cuda:0")) << s.message();
      EXPECT_FALSE((*h)->output().data) << name << ": a failed operation has no output";
    }
    auto h = rt.Enqueue(OnDevice(OpType::kAllgather, "host_after", in.data(),
                                 DataType::kFloat32, -1));
    ASSERT_TRUE(h.ok());
    ASSERT_TRUE(WaitFor(**h).ok());
    EXPECT_EQ((*h)->output().device(), -1);
    EXPECT_EQ((*h)->output().shape, (std::vector<int64_t>{8}));
  });
}

// Reductions the device path cannot do (NCCL has no int16, uint16 or bool; integer Average)
// are refused at submission naming the tensor and the dtype, and the peer that did submit the
// name learns of the refusal instead of waiting.
TEST(RuntimeDevice, ReductionsNcclCannotDoAreRefusedAtSubmission) {
  RunRuntimes(2, FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    std::vector<int16_t> small(4, 1);
    auto r16 = rt.Enqueue(OnDevice(OpType::kReducescatter, "rs16", small.data(),
                                   DataType::kInt16, 0));
    ASSERT_FALSE(r16.ok());
    EXPECT_EQ(r16.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Has(r16.status().message(), "reducescatter 'rs16'")) << r16.status().message();
    EXPECT_TRUE(Has(r16.status().message(), "int16")) << r16.status().message();
    EXPECT_TRUE(Has(r16.status().message(), "NCCL has no int16")) << r16.status().message();

    std::vector<uint8_t> flags(4, 1);
    auto b = rt.Enqueue(OnDevice(OpType::kAllreduce, "ar_bool", flags.data(), DataType::kBool, 0));
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Has(b.status().message(), "bool")) << b.status().message();

    // Rank 0 asks for an integer Average (refused); rank 1 a Sum of the same name, which fails
    // naming rank 0 rather than waiting for it.
    std::vector<int32_t> ints(4, 3);
    Submission avg = OnDevice(OpType::kReducescatter, "rs_avg", ints.data(), DataType::kInt32, 0);
    if (rank == 0) avg.reduce_op = ReduceOp::kAverage;
    auto a = rt.Enqueue(avg);
    if (rank == 0) {
      ASSERT_FALSE(a.ok());
      EXPECT_TRUE(Has(a.status().message(), "Average of integer CUDA tensors"))
          << a.status().message();
    } else {
      ASSERT_TRUE(a.ok()) << a.status().ToString();
      const Status s = WaitFor(**a);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
      EXPECT_TRUE(Has(s.message(), "rank 0 refused it")) << s.message();
    }
  });
}

// join with CUDA tensors where the device is missing: rank 1 joins, rank 0's device all-reduce
// then needs rank 1's zeros on a device it does not have. Both fail that all-reduce cleanly
// (rank 0's handle says why; rank 1 logs it), and the join still completes on both.
TEST(RuntimeDevice, JoinWithCudaTensorsWithoutADeviceFailsCleanly) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  RunRuntimes(2, FastConfig(), [&](Runtime& rt) {
    if (rt.layout().rank == 1) {
      auto last = rt.Join();
      ASSERT_TRUE(last.ok()) << last.status().ToString();
      EXPECT_EQ(*last, 0);
      return;
    }
    std::vector<float> in(4, 1.0f), out(4, 7.0f);
    auto h = rt.Enqueue(Allreduce("joined_dev", in.data(), out.data(), 0));
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    const Status s = WaitFor(**h);
    EXPECT_FALSE(s.ok());
    EXPECT_TRUE(Has(s.message(), "allreduce 'joined_dev'")) << s.message();
    EXPECT_TRUE(Has(s.message(), "cuda:0")) << s.message();
    EXPECT_EQ(out[0], 7.0f) << "a failed operation leaves the output untouched";
    auto last = rt.Join();
    ASSERT_TRUE(last.ok()) << last.status().ToString();
    EXPECT_EQ(*last, 0);
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

}  // namespace
}  // namespace kolo
