// The runtime's device collectives on the GPU (label `gpu`): allgather, alltoall and
// reducescatter of every dtype against host references, waits on the framework's stream, the
// unequal-part paths and join's zeros on two GPUs, fusion-buffer reuse and shutdown with handles
// in flight. Each test skips with the reason when there is no device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "collectives/cuda/device.h"
#include "collectives/reduce.h"
#include "collectives/select/registry.h"
#include "fusion/cuda/device_pack.h"
#include "runtime/device/device_ops.h"
#include "runtime/operations.h"
#include "tests/gpu/gpu_test_util.h"
#include "kolo/config.h"
#include "unit/thread_world.h"

namespace kolo {
namespace {

using gpu_testing::kAllDtypes;
using gpu_testing::kPoison;
using gpu_testing::Values;

// ---- the device collectives of the runtime (runtime/device/device_ops.h) ---------------------------

void* ToDevice(const std::vector<uint8_t>& bytes) {
  void* d = nullptr;
  if (cudaMalloc(&d, bytes.size() + 1) != cudaSuccess) return nullptr;
  cudaMemcpy(d, bytes.data(), bytes.size(), cudaMemcpyHostToDevice);
  return d;
}

std::vector<uint8_t> FromDevice(const void* d, size_t bytes) {
  std::vector<uint8_t> out(bytes);
  if (bytes) cudaMemcpy(out.data(), d, bytes, cudaMemcpyDeviceToHost);
  return out;
}

// An output kolo allocated must be on the input's device, not host memory made to look like it.
void ExpectOnDevice(const OutputBuffer& out, int device) {
  EXPECT_EQ(out.device(), device);
  const PointerKind k = ClassifyPointer(out.data.get());
  EXPECT_EQ(k.memory, MemoryKind::kCuda);
  EXPECT_EQ(k.device, device);
}

Submission DeviceSubmission(OpType op, const std::string& name, const void* in, DataType dtype,
                            std::vector<int64_t> shape) {
  Submission s;
  s.op = op;
  s.name = name;
  s.input = in;
  s.dtype = dtype;
  s.shape = std::move(shape);
  return s;  // device: detected from the pointer, as for C API callers
}

// One rank: allgather and alltoall of every dtype (they move bytes, so int16 and bool too) go
// through NCCL (ncclAllGather; ncclSend/ncclRecv to itself) into a new buffer on the device;
// the result of one rank is its input, element for element.
TEST(GpuRuntime, AllgatherAndAlltoallOfEveryDtypeOnOneRank) {
  KOLO_SKIP_WITHOUT_GPU();
  if (!KOLO_WITH_NCCL) GTEST_SKIP() << "built without NCCL";
  testing::RunRuntimes(1, testing::FastConfig(), [&](Runtime& rt) {
    for (DataType dtype : kAllDtypes) {
      SCOPED_TRACE(std::string(DataTypeName(dtype)));
      const std::vector<int64_t> shape = {7, 3};
      const size_t bytes = 21 * DataTypeSize(dtype);
      const std::vector<uint8_t> in = Values(dtype, 21, 9);
      void* d = ToDevice(in);
      ASSERT_NE(d, nullptr);
      auto g = rt.Enqueue(DeviceSubmission(OpType::kAllgather, "ag_" + std::string(DataTypeName(dtype)),
                                           d, dtype, shape));
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      Submission a = DeviceSubmission(OpType::kAlltoall, "a2a_" + std::string(DataTypeName(dtype)),
                                      d, dtype, shape);
      a.splits = {7};
      auto t = rt.Enqueue(a);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      for (auto* h : {&*g, &*t}) {
        const Status st = testing::WaitFor(**h);
        ASSERT_TRUE(st.ok()) << st.ToString();
        const OutputBuffer& out = (**h).output();
        ExpectOnDevice(out, 0);
        EXPECT_EQ(out.shape, shape);
        EXPECT_EQ(FromDevice(out.data.get(), bytes), in);
      }
      EXPECT_EQ((*t)->output().splits, std::vector<int64_t>{7});
      cudaFree(d);
    }
  });
}

// One rank: reducescatter (ncclReduceScatter) with Sum and Average, prescale and postscale, for
// the dtypes NCCL reduces, against the host ScaleCopy of the input (one rank's sum is its
// input). prescale 1 reads the input directly; other prescales stage a scaled copy first.
TEST(GpuRuntime, ReducescatterOnOneRankMatchesTheHostReference) {
  KOLO_SKIP_WITHOUT_GPU();
  if (!KOLO_WITH_NCCL) GTEST_SKIP() << "built without NCCL";
  testing::RunRuntimes(1, testing::FastConfig(), [&](Runtime& rt) {
    int k = 0;
    for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                           DataType::kBFloat16, DataType::kInt32, DataType::kInt64,
                           DataType::kUInt8}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        if (op == ReduceOp::kAverage && !IsFloatingPoint(dtype)) continue;
        for (double pre : {1.0, 2.0}) {
          const double post = IsFloatingPoint(dtype) ? 0.5 : 1.0;
          SCOPED_TRACE(std::string(DataTypeName(dtype)) + " " +
                       std::string(ReduceOpName(op)) + " pre " + std::to_string(pre));
          const size_t count = 9 * 5;
          const std::vector<uint8_t> in = Values(dtype, count, 4);
          void* d = ToDevice(in);
          Submission s = DeviceSubmission(OpType::kReducescatter, "rs" + std::to_string(k++), d,
                                          dtype, {9, 5});
          s.reduce_op = op;
          s.prescale = pre;
          s.postscale = post;
          auto h = rt.Enqueue(s);
          ASSERT_TRUE(h.ok()) << h.status().ToString();
          const Status st = testing::WaitFor(**h);
          ASSERT_TRUE(st.ok()) << st.ToString();
          const OutputBuffer& out = (*h)->output();
          ExpectOnDevice(out, 0);
          EXPECT_EQ(out.shape, (std::vector<int64_t>{9, 5}));
          // The device path's order: prescale, NCCL (in the dtype), postscale.
          std::vector<uint8_t> once(in.size()), want(in.size());
          ASSERT_TRUE(ScaleCopy(once.data(), in.data(), count, dtype, pre).ok());
          ASSERT_TRUE(ScaleCopy(want.data(), once.data(), count, dtype, post).ok());
          EXPECT_EQ(FromDevice(out.data.get(), in.size()), want);
          cudaFree(d);
        }
      }
    }
  });
}

// Ready-event ordering for the ops whose output kolo allocates: the tensor's last write (a
// memset to zero) is queued on the framework's stream behind a 1 GiB copy when it is submitted;
// the gathered output must hold the zeros.
TEST(GpuRuntime, AllgatherWaitsForTheFrameworksStream) {
  KOLO_SKIP_WITHOUT_GPU();
  if (!KOLO_WITH_NCCL) GTEST_SKIP() << "built without NCCL";
  testing::RunRuntimes(1, testing::FastConfig(), [&](Runtime& rt) {
    const size_t n = 1 << 20;
    const gpu_testing::ZerosBehindACopy busy(n);
    ASSERT_TRUE(busy.ok());
    Submission s = DeviceSubmission(OpType::kAllgather, "ordered_gather", busy.tensor(),
                                    DataType::kFloat32, {static_cast<int64_t>(n)});
    s.ready_stream = busy.framework();
    auto h = rt.Enqueue(s);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    ASSERT_TRUE(testing::WaitFor(**h).ok());
    EXPECT_TRUE(busy.AllZero((*h)->output().data.get()));
  });
}

// The same without a stream, as kolo.torch submits on torch's default stream (handle 0): the
// write is queued on CUDA's legacy stream, and kolo's own (non-blocking) stream must still wait
// for it. Reads ones where no event is recorded for a null stream.
TEST(GpuRuntime, AllgatherWithoutAStreamWaitsForTheLegacyStream) {
  KOLO_SKIP_WITHOUT_GPU();
  if (!KOLO_WITH_NCCL) GTEST_SKIP() << "built without NCCL";
  testing::RunRuntimes(1, testing::FastConfig(), [&](Runtime& rt) {
    const size_t n = 1 << 20;
    // A first all-gather makes the NCCL communicator, whose set-up might itself wait for the
    // legacy stream; the one that counts runs on a made communicator.
    const gpu_testing::ZerosBehindACopy warm(n);
    ASSERT_TRUE(warm.ok());
    Submission w = DeviceSubmission(OpType::kAllgather, "legacy_warm_up", warm.tensor(),
                                    DataType::kFloat32, {static_cast<int64_t>(n)});
    w.ready_stream = warm.framework();
    auto wh = rt.Enqueue(w);
    ASSERT_TRUE(wh.ok()) << wh.status().ToString();
    ASSERT_TRUE(testing::WaitFor(**wh).ok());
    const gpu_testing::ZerosBehindACopy busy(n, /*legacy=*/true);
    ASSERT_TRUE(busy.ok());
    Submission s = DeviceSubmission(OpType::kAllgather, "legacy_gather", busy.tensor(),
                                    DataType::kFloat32, {static_cast<int64_t>(n)});
    s.ready_stream = nullptr;
    auto h = rt.Enqueue(s);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    ASSERT_TRUE(testing::WaitFor(**h).ok());
    EXPECT_TRUE(busy.AllZero((*h)->output().data.get()));
  });
}

// Unequal parts need two ranks, and NCCL wants a GPU per rank: two threads, rank r on cuda:r,
// calling the runtime's device functions directly (the runtime's negotiation makes every
// submitter name the same device, so it cannot put two ranks of one process on two GPUs).
// Those functions only enqueue (the runtime leaves the wait to its finaliser): each thread
// waits for its own device before reading. Rank-unique inputs; references computed from every
// rank's known input.
TEST(GpuRuntime, UnequalPartsOnTwoGpus) {
  KOLO_SKIP_WITHOUT_GPU();
  if (!KOLO_WITH_NCCL) GTEST_SKIP() << "built without NCCL";
  if (CudaDeviceCount() < 2) GTEST_SKIP() << "needs two CUDA devices";
  const DataType f32 = DataType::kFloat32;
  auto input = [](int rank, size_t count) {
    std::vector<float> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>(rank * 1000 + i);
    return v;
  };
  const CollectiveChoice choice;  // the device entries: NCCL's
  testing::RunOnThreadWorld(2, [&](Communicator& comm) {
    const int me = comm.Rank();
    cudaSetDevice(me);
    // allgather: rank 0 has 3 rows of 2, rank 1 has 5 (grouped ncclBroadcast).
    const std::vector<size_t> rows = {3, 5};
    std::vector<float> mine = input(me, rows[me] * 2);
    std::vector<uint8_t> bytes(mine.size() * 4);
    std::memcpy(bytes.data(), mine.data(), bytes.size());
    void* d = ToDevice(bytes);
    DeviceOpResult g;
    const Status gs = DeviceAllgather(comm, choice, me, d, {rows[0] * 8, rows[1] * 8}, nullptr, &g);
    ASSERT_TRUE(gs.ok()) << gs.ToString();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the calls only enqueue
    ExpectOnDevice(g.output, me);
    std::vector<float> want;
    for (int r = 0; r < 2; ++r) {
      auto part = input(r, rows[r] * 2);
      want.insert(want.end(), part.begin(), part.end());
    }
    std::vector<float> got(want.size());
    cudaMemcpy(got.data(), g.output.data.get(), got.size() * 4, cudaMemcpyDeviceToHost);
    EXPECT_EQ(got, want);
    cudaFree(d);

    // alltoall: rank q sends q+1 floats to rank 0 and 2 to rank 1.
    const std::vector<size_t> send = {static_cast<size_t>(me + 1) * 4, 8};
    const std::vector<size_t> recv = me == 0 ? std::vector<size_t>{4, 8}
                                             : std::vector<size_t>{8, 8};
    std::vector<float> out_mine = input(me, static_cast<size_t>(me) + 3);
    std::vector<uint8_t> ob(out_mine.size() * 4);
    std::memcpy(ob.data(), out_mine.data(), ob.size());
    d = ToDevice(ob);
    DeviceOpResult t;
    const Status ts = DeviceAlltoall(comm, choice, me, d, send, recv, nullptr, &t);
    ASSERT_TRUE(ts.ok()) << ts.ToString();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ExpectOnDevice(t.output, me);
    std::vector<float> want_t;
    for (int q = 0; q < 2; ++q) {
      auto in_q = input(q, static_cast<size_t>(q) + 3);
      const size_t from = me == 0 ? 0 : static_cast<size_t>(q) + 1;
      const size_t n = me == 0 ? static_cast<size_t>(q) + 1 : 2;
      want_t.insert(want_t.end(), in_q.begin() + from, in_q.begin() + from + n);
    }
    std::vector<float> got_t(want_t.size());
    cudaMemcpy(got_t.data(), t.output.data.get(), got_t.size() * 4, cudaMemcpyDeviceToHost);
    EXPECT_EQ(got_t, want_t);
    cudaFree(d);

    // reducescatter of 5 rows of 3 (Horovod's split: 3 rows to rank 0, 2 to rank 1), Average
    // with prescale 2: the padded path.
    const std::vector<size_t> counts = {9, 6};
    std::vector<float> rs = input(me, 15);
    std::vector<uint8_t> rb(rs.size() * 4);
    std::memcpy(rb.data(), rs.data(), rb.size());
    d = ToDevice(rb);
    DeviceOpResult r;
    const Status rs_status = DeviceReducescatter(comm, choice, me, d, counts, f32,
                                                 ReduceOp::kAverage, 2.0, 1.0, nullptr, &r);
    ASSERT_TRUE(rs_status.ok()) << rs_status.ToString();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ExpectOnDevice(r.output, me);
    const size_t start = me == 0 ? 0 : 9;
    std::vector<float> got_r(counts[me]), want_r(counts[me]);
    cudaMemcpy(got_r.data(), r.output.data.get(), got_r.size() * 4, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < counts[me]; ++i) {
      want_r[i] = (input(0, 15)[start + i] * 2 + input(1, 15)[start + i] * 2) / 2;
    }
    EXPECT_EQ(got_r, want_r);
    cudaFree(d);
  });
}

// join with CUDA tensors on two GPUs: rank 1 joins naming cuda:1 for its zeros; rank 0's
// Average all-reduce on cuda:0 then divides by both ranks, the joined one contributing zeros.
TEST(GpuRuntime, JoinedRankContributesZerosOnItsDevice) {
  KOLO_SKIP_WITHOUT_GPU();
  if (!KOLO_WITH_NCCL) GTEST_SKIP() << "built without NCCL";
  if (CudaDeviceCount() < 2) GTEST_SKIP() << "needs two CUDA devices";
  testing::RunRuntimes(2, testing::FastConfig(), [&](Runtime& rt) {
    if (rt.layout().rank == 1) {
      auto last = rt.Join(1);
      ASSERT_TRUE(last.ok()) << last.status().ToString();
      return;
    }
    cudaSetDevice(0);
    const size_t n = 1000;
    std::vector<float> host(n);
    std::iota(host.begin(), host.end(), 1.0f);
    float* d = nullptr;
    ASSERT_EQ(cudaMalloc(&d, n * 4), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d, host.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
    Submission s = DeviceSubmission(OpType::kAllreduce, "joined_avg", d, DataType::kFloat32,
                                    {static_cast<int64_t>(n)});
    s.output = d;
    s.reduce_op = ReduceOp::kAverage;
    auto h = rt.Enqueue(s);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    const Status st = testing::WaitFor(**h);
    ASSERT_TRUE(st.ok()) << st.ToString();
    std::vector<float> got(n);
    cudaMemcpy(got.data(), d, n * 4, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], host[i] / 2) << "element " << i;
    cudaFree(d);
    ASSERT_TRUE(rt.Join().ok());
  });
}

// The finaliser (runtime/finaliser.h): many device Responses in flight at once, the background
// thread enqueueing the next while the GPU still runs the previous ones. Small fusion threshold
// and growing sizes, so the one fusion buffer is reused (and grown) by Responses whose work is
// still queued on kolo's stream: every tensor must still hold its own sum (unique values per
// tensor catch a pack that overwrote an unpack not yet done), and the handles complete.
TEST(GpuRuntime, ManyDeviceResponsesInFlightReuseTheFusionBuffer) {
  KOLO_SKIP_WITHOUT_GPU();
  if (!KOLO_WITH_NCCL) GTEST_SKIP() << "built without NCCL";
  Config config = testing::FastConfig();
  config.fusion_threshold_bytes = 256 * 1024;
  testing::RunRuntimes(1, config, [&](Runtime& rt) {
    constexpr int kTensors = 96;
    std::vector<float*> d(kTensors);
    std::vector<size_t> counts(kTensors);
    std::vector<std::shared_ptr<Handle>> handles;
    for (int k = 0; k < kTensors; ++k) {
      counts[k] = 1000 + static_cast<size_t>(k) * 1500;  // up to ~570 KiB: several buffers' worth
      std::vector<float> host(counts[k]);
      for (size_t i = 0; i < counts[k]; ++i) host[i] = static_cast<float>(k * 7 + i % 11);
      ASSERT_EQ(cudaMalloc(&d[k], counts[k] * 4), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(d[k], host.data(), counts[k] * 4, cudaMemcpyHostToDevice),
                cudaSuccess);
    }
    for (int k = 0; k < kTensors; ++k) {
      Submission s;
      s.name = "inflight" + std::to_string(k);
      s.input = d[k];
      s.output = d[k];
      s.shape = {static_cast<int64_t>(counts[k])};
      s.prescale = 3.0;  // every tensor through the fusion buffer (no direct path)
      auto h = rt.Enqueue(s);
      ASSERT_TRUE(h.ok()) << h.status().ToString();
      handles.push_back(*h);
    }
    for (int k = 0; k < kTensors; ++k) {
      const Status st = testing::WaitFor(*handles[k]);
      ASSERT_TRUE(st.ok()) << "tensor " << k << ": " << st.ToString();
      std::vector<float> got(counts[k]);
      ASSERT_EQ(cudaMemcpy(got.data(), d[k], counts[k] * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      for (size_t i = 0; i < counts[k]; ++i) {
        ASSERT_EQ(got[i], static_cast<float>(k * 7 + i % 11) * 3.0f)
            << "tensor " << k << " element " << i;
      }
      cudaFree(d[k]);
    }
  });
}

// Shutdown with device work still in flight completes every handle (OK once the GPU finished
// it), and a device broadcast completes through the finaliser with its result.
TEST(GpuRuntime, ShutdownCompletesDeviceHandlesInFlight) {
  KOLO_SKIP_WITHOUT_GPU();
  if (!KOLO_WITH_NCCL) GTEST_SKIP() << "built without NCCL";
  std::vector<std::shared_ptr<Handle>> handles;
  const size_t n = size_t{16} << 20;  // 64 MiB each: still running when Shutdown starts
  std::vector<float*> d(4);
  for (float*& p : d) {
    ASSERT_EQ(cudaMalloc(&p, n * 4), cudaSuccess);
    ASSERT_EQ(cudaMemset(p, 0, n * 4), cudaSuccess);
  }
  testing::RunRuntimes(1, testing::FastConfig(), [&](Runtime& rt) {
    Submission b;
    b.op = OpType::kBroadcast;
    b.name = "bcast";
    b.input = d[0];
    b.output = d[0];
    b.shape = {static_cast<int64_t>(n)};
    auto hb = rt.Enqueue(b);
    ASSERT_TRUE(hb.ok()) << hb.status().ToString();
    ASSERT_TRUE(testing::WaitFor(**hb).ok());
    for (size_t k = 1; k < d.size(); ++k) {
      Submission s;
      s.name = "late" + std::to_string(k);
      s.input = d[k];
      s.output = d[k];
      s.shape = {static_cast<int64_t>(n)};
      auto h = rt.Enqueue(s);
      ASSERT_TRUE(h.ok()) << h.status().ToString();
      handles.push_back(*h);
    }
  });
  for (size_t k = 0; k < handles.size(); ++k) {
    ASSERT_TRUE(handles[k]->Poll()) << "handle " << k << " not completed by Shutdown";
  }
  for (float* p : d) cudaFree(p);
}

// An output handed to the caller is freed in the order of the stream it was submitted on, never
// by waiting for the device: with other work still running on an unrelated stream, dropping it
// returns at once (a device-wide wait here would stall every step of a training loop).
TEST(GpuMemory, FreeingAnOutputDoesNotWaitForTheDevice) {
  KOLO_SKIP_WITHOUT_GPU();
  cudaStream_t consumer = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking), cudaSuccess);
  // Allocated first, so the pool exists and nothing but the free runs while the copies do.
  auto p = AllocateOnStream(0, consumer, size_t{1} << 20);
  if (p.status().code() == StatusCode::kUnimplemented) {
    GTEST_SKIP() << p.status().message();
  }
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(cudaMemsetAsync(*p, 0, size_t{1} << 20, consumer), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(consumer), cudaSuccess);
  gpu_testing::ZerosBehindACopy busy(1024);  // 64 copies of 1 GiB on a stream of its own
  ASSERT_TRUE(busy.ok());
  { std::unique_ptr<void, BufferFree> output(*p, BufferFree{0, true, consumer}); }
  EXPECT_EQ(cudaStreamQuery(busy.framework()), cudaErrorNotReady)
      << "dropping the output waited for the device";
  EXPECT_EQ(cudaStreamSynchronize(consumer), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(busy.framework()), cudaSuccess);
  cudaStreamDestroy(consumer);
}

}  // namespace
}  // namespace kolo
