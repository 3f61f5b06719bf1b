// The GPU path's tests (label `gpu`): the batched pack/unpack kernels against the host kernel
// (collectives/reduce.h's ScaleCopy is the reference), NCCL all-reduce through kolo's
// algorithms, and the runtime's fused device all-reduce. The runtime's other device collectives
// are in gpu_runtime_test.cc. Each test that needs a device skips with the reason when there is
// none, so the suite passes on CPU-only machines (CI) and does the real checks on a GPU
// (scripts/gpu_check.sh). The soft "no device" behaviour itself is tested everywhere.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "collectives/cuda/device.h"
#include "collectives/node_context.h"
#include "collectives/reduce.h"
#include "collectives/select/registry.h"
#include "fusion/cuda/device_pack.h"
#include "kolo/config.h"
#include "runtime/device/device_ops.h"
#include "runtime/operations.h"
#include "tests/gpu/gpu_test_util.h"
#include "unit/thread_world.h"

#if KOLO_WITH_NCCL
#include "collectives/nccl/nccl_comm.h"
#endif

namespace kolo {
namespace {

using gpu_testing::FirstDifference;
using gpu_testing::kAllDtypes;
using gpu_testing::kPoison;
using gpu_testing::Values;


TEST(GpuDevice, NoDeviceIsSoft) {
  // On any machine: counting devices never throws or aborts, and host memory is host memory.
  std::string why;
  const int n = CudaDeviceCount(&why);
  EXPECT_GE(n, 0);
  if (n == 0) {
    EXPECT_FALSE(why.empty());
  }
  std::vector<float> host(16);
  EXPECT_EQ(ClassifyPointer(host.data()).memory, MemoryKind::kHost);
  EXPECT_EQ(ClassifyPointer(nullptr).memory, MemoryKind::kHost);
  EXPECT_EQ(CudaBuilt(), KOLO_WITH_CUDA != 0);
}

TEST(GpuDevice, ClassifiesDeviceMemory) {
  KOLO_SKIP_WITHOUT_GPU();
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 256), cudaSuccess);
  const PointerKind k = ClassifyPointer(d);
  EXPECT_EQ(k.memory, MemoryKind::kCuda);
  EXPECT_GE(k.device, 0);
  void* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, 256), cudaSuccess);
  EXPECT_EQ(ClassifyPointer(pinned).memory, MemoryKind::kHost);
  cudaFreeHost(pinned);
  cudaFree(d);
}

// Pack tensors of sizes 0..65537 into one poisoned buffer with gaps, scaled, and back: every
// element equals the host ScaleCopy of its input, every gap byte is still poison.
TEST(GpuPack, EveryDtypeAndScaleMatchesTheHostKernel) {
  KOLO_SKIP_WITHOUT_GPU();
  const std::vector<size_t> counts = {0, 1, 7, 1000, 65537, 3, 4096};
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  for (DataType dtype : kAllDtypes) {
    for (double scale : {1.0, 0.5, 3.0}) {
      if (dtype == DataType::kBool && scale != 1.0) continue;
      SCOPED_TRACE(std::string(DataTypeName(dtype)) + " x " + std::to_string(scale));
      const size_t es = DataTypeSize(dtype);
      std::vector<size_t> offsets;
      size_t total = 0;
      for (size_t c : counts) {
        offsets.push_back(total);
        total += c * es + 64;  // a 64-byte gap after each tensor stays poisoned
      }
      std::vector<void*> dev_in(counts.size(), nullptr), dev_out(counts.size(), nullptr);
      std::vector<std::vector<uint8_t>> host_in(counts.size());
      for (size_t i = 0; i < counts.size(); ++i) {
        host_in[i] = Values(dtype, counts[i], static_cast<uint32_t>(i * 31 + 7));
        ASSERT_EQ(cudaMalloc(&dev_in[i], counts[i] * es + 1), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&dev_out[i], counts[i] * es + 1), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(dev_in[i], host_in[i].data(), counts[i] * es,
                             cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(cudaMemset(dev_out[i], kPoison, counts[i] * es + 1), cudaSuccess);
      }
      void* fused = nullptr;
      ASSERT_EQ(cudaMalloc(&fused, total), cudaSuccess);
      ASSERT_EQ(cudaMemset(fused, kPoison, total), cudaSuccess);
      std::vector<const void*> srcs(dev_in.begin(), dev_in.end());
      ASSERT_TRUE(PackToFusion(srcs, counts, offsets, fused, dtype, scale, stream).ok());
      ASSERT_TRUE(UnpackFromFusion(fused, offsets, dev_out, counts, dtype, scale, stream).ok());
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      std::vector<uint8_t> packed(total);
      ASSERT_EQ(cudaMemcpy(packed.data(), fused, total, cudaMemcpyDeviceToHost), cudaSuccess);
      for (size_t i = 0; i < counts.size(); ++i) {
        const size_t bytes = counts[i] * es;
        std::vector<uint8_t> once(bytes), twice(bytes);
        ASSERT_TRUE(ScaleCopy(once.data(), host_in[i].data(), counts[i], dtype, scale).ok());
        ASSERT_TRUE(ScaleCopy(twice.data(), once.data(), counts[i], dtype, scale).ok());
        EXPECT_EQ(0, std::memcmp(packed.data() + offsets[i], once.data(), bytes)) << "tensor " << i;
        for (size_t g = 0; g < 64; ++g) {
          ASSERT_EQ(packed[offsets[i] + bytes + g], kPoison) << "gap after tensor " << i;
        }
        std::vector<uint8_t> out(bytes + 1);
        ASSERT_EQ(cudaMemcpy(out.data(), dev_out[i], bytes + 1, cudaMemcpyDeviceToHost),
                  cudaSuccess);
        EXPECT_EQ(0, std::memcmp(out.data(), twice.data(), bytes)) << "unpacked tensor " << i;
        EXPECT_EQ(out[bytes], kPoison) << "byte past tensor " << i;
        cudaFree(dev_in[i]);
        cudaFree(dev_out[i]);
      }
      cudaFree(fused);
    }
  }
  cudaStreamDestroy(stream);
}

// More tensors than one launch's table (kMaxSegmentsPerLaunch): 300 tensors of 1..300 floats.
TEST(GpuPack, ManyTensorsSpanSeveralLaunches) {
  KOLO_SKIP_WITHOUT_GPU();
  const int n = 300;
  std::vector<size_t> counts, offsets;
  size_t total = 0;
  for (int i = 0; i < n; ++i) {
    counts.push_back(static_cast<size_t>(i + 1));
    offsets.push_back(total * sizeof(float));
    total += static_cast<size_t>(i + 1);
  }
  std::vector<float> host(total);
  for (size_t i = 0; i < total; ++i) host[i] = static_cast<float>(i % 977) * 0.25f;
  float* src = nullptr;
  float* fused = nullptr;
  ASSERT_EQ(cudaMalloc(&src, total * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&fused, total * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(src, host.data(), total * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaMemset(fused, kPoison, total * sizeof(float)), cudaSuccess);
  std::vector<const void*> tensors;
  for (int i = 0; i < n; ++i) tensors.push_back(src + offsets[i] / sizeof(float));
  ASSERT_TRUE(PackToFusion(tensors, counts, offsets, fused, DataType::kFloat32, 2.0, nullptr).ok());
  std::vector<float> out(total);
  ASSERT_EQ(cudaMemcpy(out.data(), fused, total * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (size_t i = 0; i < total; ++i) ASSERT_EQ(out[i], host[i] * 2.0f) << "element " << i;
  cudaFree(src);
  cudaFree(fused);
}

// More tiles than the grid has blocks (1024 tiles of 16 KiB): the blocks stride over them all,
// aligned (16-byte loads) and not (one element at a time), up to the last element.
TEST(GpuPack, TensorsLargerThanTheGridAreCoveredToTheLastElement) {
  KOLO_SKIP_WITHOUT_GPU();
  const size_t count = (size_t{32} << 20) + 3;  // 128 MiB of float32 and 3 more: 8193 tiles
  float* src = nullptr;
  float* dst = nullptr;
  ASSERT_EQ(cudaMalloc(&src, (count + 1) * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dst, (count + 2) * sizeof(float)), cudaSuccess);
  std::vector<float> host(count + 1);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 4099);
  ASSERT_EQ(cudaMemcpy(src, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  for (size_t shift : {0, 1}) {  // 1: the source 4 bytes off 16-byte alignment
    SCOPED_TRACE("shift " + std::to_string(shift));
    ASSERT_EQ(cudaMemset(dst, kPoison, (count + 2) * sizeof(float)), cudaSuccess);
    ASSERT_TRUE(
        BatchedScaleCopy({{src + shift, dst, count}}, DataType::kFloat32, 0.5, nullptr).ok());
    std::vector<float> out(count + 2);
    ASSERT_EQ(cudaMemcpy(out.data(), dst, out.size() * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(out[i], host[i + shift] * 0.5f) << "element " << i;
    }
    uint8_t past[8];
    std::memcpy(past, &out[count], sizeof(past));
    for (uint8_t b : past) ASSERT_EQ(b, kPoison) << "written past the last element";
  }
  cudaFree(src);
  cudaFree(dst);
}

TEST(GpuPack, BoolRefusesAScale) {
  KOLO_SKIP_WITHOUT_GPU();
  void* a = nullptr;
  ASSERT_EQ(cudaMalloc(&a, 16), cudaSuccess);
  Status s = BatchedScaleCopy({{a, a, 4}}, DataType::kBool, 2.0, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  cudaFree(a);
}

// NCCL all-reduce through kolo's algorithm on one rank (what one lent GPU allows): every dtype
// and op NCCL has; the result of one rank is its input, and the call must go through NCCL
// (communicator, stream, wait) without error.
TEST(GpuNccl, OneRankAllreduceEveryDtypeAndOp) {
  KOLO_SKIP_WITHOUT_GPU();
  if (!KOLO_WITH_NCCL) GTEST_SKIP() << "built without NCCL";
  testing::RunOnThreadWorld(1, [&](Communicator& comm) {
    AllreduceSelector forced("nccl");
    AllreduceAlgorithm* algo = forced.Find("nccl");
    ASSERT_NE(algo, nullptr);
    for (DataType dtype : kAllDtypes) {
      if (dtype == DataType::kInt16 || dtype == DataType::kUInt16 || dtype == DataType::kBool) {
        continue;  // NCCL has none of these (Supports says so)
      }
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
        const size_t count = 4097, bytes = count * DataTypeSize(dtype);
        std::vector<uint8_t> in = Values(dtype, count, 5);
        void* d = nullptr;
        ASSERT_EQ(cudaMalloc(&d, bytes), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(d, in.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
        AllreduceArgs args{d, d, count, dtype, op};
        Status s = algo->Run(comm, args);
        ASSERT_TRUE(s.ok()) << DataTypeName(dtype) << ": " << s.ToString();
        std::vector<uint8_t> out(bytes);
        ASSERT_EQ(cudaMemcpy(out.data(), d, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
        EXPECT_EQ(0, std::memcmp(out.data(), in.data(), bytes)) << DataTypeName(dtype);
        cudaFree(d);
      }
    }
  });
}

#if KOLO_WITH_NCCL
// Two process sets' device work never shares a stream: each set's runtime orders its own NCCL
// calls, and on one stream those of two sets could interleave differently on different ranks
// (a deadlock, NCCL says). A set's node communicators share its stream, keeping its
// hierarchical steps in one order.
TEST(GpuStreams, EachProcessSetHasItsOwnStreamAndItsNodeCommunicatorsShareIt) {
  KOLO_SKIP_WITHOUT_GPU();
  auto world = std::make_shared<LoopbackWorld>(1, std::chrono::seconds(10));
  LoopbackCommunicator a(world, 0), b(world, 0);
  auto sa = KoloStream(a, 0), sb = KoloStream(b, 0), sa2 = KoloStream(a, 0);
  ASSERT_TRUE(sa.ok() && sb.ok() && sa2.ok()) << sa.status().ToString() << sb.status().ToString();
  EXPECT_NE(*sa, *sb);
  EXPECT_EQ(*sa, *sa2);
  testing::RunOnThreadWorld(1, "1", [&](Communicator& comm) {
    ASSERT_TRUE(comm.node() && comm.node()->local);
    auto mine = KoloStream(comm, 0), local = KoloStream(*comm.node()->local, 0);
    ASSERT_TRUE(mine.ok() && local.ok());
    EXPECT_EQ(*mine, *local);
    EXPECT_NE(*mine, *sa);
    ReleaseKoloStreams(comm);
  });
  ReleaseKoloStreams(a);
  ReleaseKoloStreams(b);
}
#endif

// Host buffers given to the NCCL path: a clear error, not a crash.
TEST(GpuNccl, HostBuffersAreRefused) {
  KOLO_SKIP_WITHOUT_GPU();
  if (!KOLO_WITH_NCCL) GTEST_SKIP() << "built without NCCL";
  testing::RunOnThreadWorld(1, [&](Communicator& comm) {
    AllreduceSelector forced("nccl");
    std::vector<float> host(64, 1.0f);
    AllreduceArgs args{host.data(), host.data(), host.size(), DataType::kFloat32, ReduceOp::kSum};
    Status s = forced.Find("nccl")->Run(comm, args);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  });
}

// The runtime's device path on one rank: several CUDA tensors fused (pack, NCCL, unpack) with
// prescale and postscale, and Average, against host references; kolo finds the device from
// the pointers as it does for C API callers.
TEST(GpuRuntime, FusedDeviceAllreduceWithScaling) {
  KOLO_SKIP_WITHOUT_GPU();
  if (!KOLO_WITH_NCCL) GTEST_SKIP() << "built without NCCL";
  testing::RunRuntimes(1, testing::FastConfig(), [&](Runtime& rt) {
    const std::vector<size_t> counts = {1, 7, 1000, 65537};
    std::vector<float*> d(counts.size());
    std::vector<std::shared_ptr<Handle>> handles;
    for (size_t k = 0; k < counts.size(); ++k) {
      std::vector<float> host(counts[k]);
      for (size_t i = 0; i < counts[k]; ++i) host[i] = static_cast<float>(i % 13) + 0.5f * k;
      ASSERT_EQ(cudaMalloc(&d[k], counts[k] * 4), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(d[k], host.data(), counts[k] * 4, cudaMemcpyHostToDevice), cudaSuccess);
      Submission s;
      s.name = "dev" + std::to_string(k);
      s.input = d[k];
      s.output = d[k];
      s.shape = {static_cast<int64_t>(counts[k])};
      s.reduce_op = k % 2 ? ReduceOp::kAverage : ReduceOp::kSum;
      s.prescale = 2.0;
      s.postscale = 0.25;
      auto h = rt.Enqueue(s);
      ASSERT_TRUE(h.ok()) << h.status().ToString();
      handles.push_back(*h);
    }
    for (size_t k = 0; k < counts.size(); ++k) {
      const Status st = testing::WaitFor(*handles[k]);
      ASSERT_TRUE(st.ok()) << st.ToString();
      std::vector<float> got(counts[k]);
      ASSERT_EQ(cudaMemcpy(got.data(), d[k], counts[k] * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      for (size_t i = 0; i < counts[k]; ++i) {
        // One rank: sum = average = the input; times prescale and postscale.
        const float want = (static_cast<float>(i % 13) + 0.5f * k) * 2.0f * 0.25f;
        ASSERT_EQ(got[i], want) << "tensor " << k << " element " << i;
      }
      cudaFree(d[k]);
    }
  });
}

// One tensor goes to NCCL out of place, with its postscale folded into the reduction where NCCL
// can (a PreMulSum for float32 and float64) and in a pass of its own where not (float16): the
// output is input x postscale, and the input is left as it was.
TEST(GpuRuntime, OneTensorOutOfPlaceWithAPostscaleLeavesTheInput) {
  KOLO_SKIP_WITHOUT_GPU();
  if (!KOLO_WITH_NCCL) GTEST_SKIP() << "built without NCCL";
  testing::RunRuntimes(1, testing::FastConfig(), [&](Runtime& rt) {
    for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16}) {
      SCOPED_TRACE(DataTypeName(dtype));
      const size_t count = 70001, bytes = count * DataTypeSize(dtype);
      const std::vector<uint8_t> in = Values(dtype, count, 11);
      std::vector<uint8_t> want(bytes);
      ASSERT_TRUE(ScaleCopy(want.data(), in.data(), count, dtype, 0.5).ok());
      void* d_in = nullptr;
      void* d_out = nullptr;
      ASSERT_EQ(cudaMalloc(&d_in, bytes), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&d_out, bytes), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(d_in, in.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemset(d_out, kPoison, bytes), cudaSuccess);
      Submission s;
      s.name = std::string("oop.") + std::string(DataTypeName(dtype));
      s.input = d_in;
      s.output = d_out;
      s.dtype = dtype;
      s.shape = {static_cast<int64_t>(count)};
      s.reduce_op = ReduceOp::kSum;
      s.postscale = 0.5;
      auto h = rt.Enqueue(s);
      ASSERT_TRUE(h.ok()) << h.status().ToString();
      const Status st = testing::WaitFor(**h);
      ASSERT_TRUE(st.ok()) << st.ToString();
      std::vector<uint8_t> got(bytes), kept(bytes);
      ASSERT_EQ(cudaMemcpy(got.data(), d_out, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(kept.data(), d_in, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
      const size_t size = DataTypeSize(dtype);
      EXPECT_EQ("", FirstDifference(got.data(), want.data(), bytes, size)) << "output";
      EXPECT_EQ("", FirstDifference(kept.data(), in.data(), bytes, size))
          << "the input was written";
      cudaFree(d_in);
      cudaFree(d_out);
    }
  });
}

// Ready-event ordering: the framework's stream is still copying 1 GiB when its last kernel-
// side write (a memset to zero) is queued and the tensor is submitted at once; kolo must wait
// for that stream, so it reduces the zeros, not the ones the tensor held before.
TEST(GpuRuntime, WaitsForTheFrameworksStream) {
  KOLO_SKIP_WITHOUT_GPU();
  if (!KOLO_WITH_NCCL) GTEST_SKIP() << "built without NCCL";
  testing::RunRuntimes(1, testing::FastConfig(), [&](Runtime& rt) {
    const size_t n = 1 << 20;
    const gpu_testing::ZerosBehindACopy busy(n);
    ASSERT_TRUE(busy.ok());
    Submission s;
    s.name = "ordered";
    s.input = busy.tensor();
    s.output = busy.tensor();
    s.shape = {static_cast<int64_t>(n)};
    s.ready_stream = busy.framework();
    auto h = rt.Enqueue(s);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    ASSERT_TRUE(testing::WaitFor(**h).ok());
    EXPECT_TRUE(busy.AllZero(busy.tensor()));
  });
}

}  // namespace
}  // namespace kolo
