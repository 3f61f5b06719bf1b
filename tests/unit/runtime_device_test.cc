// The runtime's handling of CUDA tensors where no GPU is needed to check it: ranks
// that disagree on where a tensor lives get a clear error naming it and the ranks; CUDA tensors
// on a machine without the device fail on every rank instead of hanging (every operation, and
// a joined rank's zeros), through the finaliser as real device work would, in Response order;
// reductions the device path cannot do (dtypes NCCL lacks, integer Average, Adasum) are
// refused at once and their peers learn of it; host pointers are host memory. The device path
// itself runs under the `gpu` label (tests/gpu/).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/cuda/device.h"
#include "tests/harness/submission.h"
#include "tests/unit/has_text.h"
#include "unit/thread_world.h"

namespace kolo {
namespace {

using testing::FastConfig;
using testing::RunRuntimes;
using testing::WaitFor;

Submission Allreduce(const std::string& name, const void* in, void* out, int device) {
  Submission s =
      testing::MakeSubmission(OpType::kAllreduce, name, in, out, DataType::kFloat32, {4});
  s.device = device;
  return s;
}

using kolo::testing::Has;

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

// Each rank on its own GPU (cuda:local_rank, as on a multi-GPU node): the ranks agree on GPU
// memory, so this is no mismatch; each rank runs on its own device (none exists here, so each
// fails naming its own ordinal), and the host mismatch message names kinds, not ordinals.
TEST(RuntimeDevice, RanksOnDifferentGpusAgreeOnTheMemoryKind) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  RunRuntimes(3, FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    std::vector<float> in(4, 1.0f), out(4);
    auto h = rt.Enqueue(Allreduce("per_gpu", in.data(), out.data(), rank));
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    const Status s = WaitFor(**h);
    EXPECT_FALSE(s.ok());
    EXPECT_FALSE(Has(s.message(), "mismatch")) << s.message();
    EXPECT_TRUE(Has(s.message(), "cuda:" + std::to_string(rank))) << s.message();
    auto m = rt.Enqueue(Allreduce("kinds", in.data(), out.data(), rank == 2 ? -1 : rank));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const Status sm = WaitFor(**m);
    EXPECT_EQ(sm.code(), StatusCode::kInvalidArgument) << sm.ToString();
    EXPECT_TRUE(Has(sm.message(), "device mismatch: ranks 0,1 have cuda, rank 2 has cpu"))
        << sm.message();
  });
}

Submission OnDevice(OpType op, const std::string& name, const void* in, DataType dtype,
                    int device) {
  Submission s = testing::MakeSubmission(op, name, in, nullptr, dtype, {4});
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

    // Adasum runs on host tensors only: a CUDA tensor is refused, on every rank alike.
    std::vector<float> grads(4, 1.0f);
    Submission ada = OnDevice(OpType::kAllreduce, "ar_adasum", grads.data(), DataType::kFloat32, 0);
    ada.output = grads.data();
    ada.reduce_op = ReduceOp::kAdasum;
    auto ad = rt.Enqueue(ada);
    ASSERT_FALSE(ad.ok());
    EXPECT_EQ(ad.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Has(ad.status().message(), "allreduce 'ar_adasum'")) << ad.status().message();
    EXPECT_TRUE(Has(ad.status().message(), "Adasum of CUDA tensors is not supported"))
        << ad.status().message();

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

// Allgather, alltoall and reducescatter of CUDA tensors complete through the finaliser, as
// allreduce and broadcast do, so device handles complete in the order their Responses ran:
// broadcasts (completed by the finaliser) alternate with allgathers, and once the last
// allgather has completed every broadcast before it has too. (Were the allgathers completed at
// once on the background thread, they would overtake the broadcasts still in the finaliser.)
TEST(RuntimeDevice, DeviceOutputOpsCompleteInResponseOrderWithTheOthers) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  constexpr int kPairs = 30;
  RunRuntimes(2, FastConfig(), [&](Runtime& rt) {
    std::vector<float> data(4, 1.0f);
    std::vector<std::shared_ptr<Handle>> handles;
    for (int i = 0; i < kPairs; ++i) {
      Submission b = OnDevice(OpType::kBroadcast, "b" + std::to_string(i), data.data(),
                              DataType::kFloat32, 0);
      b.output = data.data();
      auto hb = rt.Enqueue(b);
      auto hg = rt.Enqueue(OnDevice(OpType::kAllgather, "g" + std::to_string(i), data.data(),
                                    DataType::kFloat32, 0));
      ASSERT_TRUE(hb.ok()) << hb.status().ToString();
      ASSERT_TRUE(hg.ok()) << hg.status().ToString();
      handles.push_back(*hb);
      handles.push_back(*hg);
    }
    (void)WaitFor(*handles.back());
    for (size_t i = 0; i < handles.size(); ++i) {
      ASSERT_TRUE(handles[i]->Poll()) << "handle " << i << " ("
                                      << (i % 2 ? "allgather" : "broadcast")
                                      << ") overtaken by the last allgather";
      const Status& s = handles[i]->status();
      EXPECT_FALSE(s.ok());
      EXPECT_TRUE(Has(s.message(), (i % 2 ? "allgather 'g" : "broadcast 'b") +
                                       std::to_string(i / 2) + "'"))
          << s.message();
      EXPECT_TRUE(Has(s.message(), "cuda:0")) << s.message();
      EXPECT_FALSE(handles[i]->output().data);
    }
  });
}

// Each rank on its own GPU (cuda:rank), with the parts that need the most arithmetic: 5 rows
// reduce-scattered over 3 ranks with Average and a prescale (the padded, staged path), and an
// alltoall with unequal splits. Each rank fails through the finaliser naming the operation,
// the tensor and its own device, none hangs, and the same operations on host memory then give
// the right values (the parts shared by both paths are right).
TEST(RuntimeDevice, DeviceOutputOpsRunOnEachRanksOwnDevice) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  RunRuntimes(3, FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    std::vector<float> in(15);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(rank * 100 + i);
    auto submit = [&](OpType op, const std::string& name, int device) {
      Submission s = OnDevice(op, name, in.data(), DataType::kFloat32, device);
      s.shape = {5, 3};
      if (op == OpType::kReducescatter) {
        s.reduce_op = ReduceOp::kAverage;
        s.prescale = 2.0;
      }
      if (op == OpType::kAlltoall) s.splits = {1, 0, 4};
      return rt.Enqueue(s);
    };
    const std::string own = "cuda:" + std::to_string(rank);
    for (OpType op : {OpType::kReducescatter, OpType::kAlltoall, OpType::kAllgather}) {
      const std::string name = "own_" + std::string(OpTypeName(op));
      auto h = submit(op, name, rank);
      ASSERT_TRUE(h.ok()) << h.status().ToString();
      const Status s = WaitFor(**h);
      EXPECT_FALSE(s.ok()) << name;
      EXPECT_TRUE(Has(s.message(), std::string(OpTypeName(op)) + " '" + name + "'"))
          << s.message();
      EXPECT_TRUE(Has(s.message(), own)) << s.message();
      EXPECT_FALSE(Has(s.message(), "mismatch")) << s.message();
      EXPECT_FALSE((*h)->output().data);
    }
    // Host memory: rank r keeps rows [0,2), [2,4), [4,5) of (2 * sum over ranks) / 3.
    auto rs = submit(OpType::kReducescatter, "host_rs", -1);
    ASSERT_TRUE(rs.ok()) << rs.status().ToString();
    ASSERT_TRUE(WaitFor(**rs).ok()) << (*rs)->status().ToString();
    const int64_t first_row = rank == 0 ? 0 : rank == 1 ? 2 : 4;
    const OutputBuffer& out = (*rs)->output();
    ASSERT_EQ(out.shape, (std::vector<int64_t>{rank == 2 ? 1 : 2, 3}));
    const float* got = static_cast<const float*>(out.data.get());
    for (int64_t i = 0; i < out.shape[0] * 3; ++i) {
      const float sum = static_cast<float>(300 + 3 * (first_row * 3 + i));
      EXPECT_NEAR(got[i], 2.0f * sum / 3.0f, 1e-3) << "element " << i;
    }
    auto a2a = submit(OpType::kAlltoall, "host_a2a", -1);
    ASSERT_TRUE(a2a.ok()) << a2a.status().ToString();
    ASSERT_TRUE(WaitFor(**a2a).ok()) << (*a2a)->status().ToString();
    // Every rank sends 1 row to rank 0, none to rank 1, 4 to rank 2.
    const std::vector<int64_t> want_splits =
        rank == 0 ? std::vector<int64_t>{1, 1, 1}
                  : rank == 1 ? std::vector<int64_t>{0, 0, 0} : std::vector<int64_t>{4, 4, 4};
    EXPECT_EQ((*a2a)->output().splits, want_splits);
  });
}

// A burst of device allgathers, alltoalls and reducescatters in flight when the runtimes shut
// down: Shutdown completes every handle (through the finaliser, or failing what was still
// queued), each with an error and no output.
TEST(RuntimeDevice, DeviceOutputOpsInFlightAtShutdownAllComplete) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  constexpr int kRanks = 2;
  constexpr int kBurst = 20;
  std::vector<std::vector<std::shared_ptr<Handle>>> burst(kRanks);
  std::vector<float> in(4, 1.0f);
  RunRuntimes(kRanks, FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    for (int i = 0; i < kBurst; ++i) {
      for (OpType op : {OpType::kAllgather, OpType::kAlltoall, OpType::kReducescatter}) {
        auto h = rt.Enqueue(OnDevice(op, std::string(OpTypeName(op)) + std::to_string(i),
                                     in.data(), DataType::kFloat32, rank));
        ASSERT_TRUE(h.ok()) << h.status().ToString();
        burst[rank].push_back(*h);
      }
    }
    // Returning shuts every runtime down with the burst in flight.
  });
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(burst[r].size(), 3u * kBurst);
    for (size_t i = 0; i < burst[r].size(); ++i) {
      ASSERT_TRUE(burst[r][i]->Poll()) << "rank " << r << ": handle " << i
                                       << " not completed by Shutdown";
      EXPECT_FALSE(burst[r][i]->status().ok()) << "rank " << r << ": handle " << i;
      EXPECT_FALSE(burst[r][i]->output().data) << "rank " << r << ": handle " << i;
    }
  }
}

}  // namespace
}  // namespace kolo

namespace kolo {
namespace {

// Two tensors fused into one all-reduce (a group), on cuda:0 and cuda:0 on rank 0 but on
// cuda:1 and cuda:0 on rank 1. The ranks agree only on the memory kind and each fuses its CUDA
// tensors on its own device, so a group on two GPUs of one rank would fuse everywhere and be
// refused on that rank only, its peers waiting in ncclAllReduce. One process drives one GPU
// instead: rank 1 refuses the second GPU at submission, and the refusal reaches rank 0, which
// fails the group with rank 1's reason without running it (no "no such device" from a run).
TEST(RuntimeDevice, AFusedAllreduceOnTwoGpusOfOneRankFailsTheSameWayOnEveryRank) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  std::vector<std::string> messages(2);
  RunRuntimes(2, FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    std::vector<float> a(4, 1.0f), b(4, 1.0f), out_a(4), out_b(4);
    std::vector<Submission> group = {Allreduce("split.a", a.data(), out_a.data(), rank),
                                     Allreduce("split.b", b.data(), out_b.data(), 0)};
    auto handles = rt.EnqueueGroup(group);
    if (rank == 1) {
      ASSERT_FALSE(handles.ok());
      EXPECT_EQ(handles.status().code(), StatusCode::kInvalidArgument);
      messages[rank] = handles.status().message();
      return;
    }
    ASSERT_TRUE(handles.ok()) << handles.status().ToString();
    const Status s = WaitFor(*(*handles)[0]);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    messages[rank] = s.message();
  });
  for (const std::string& m : messages) {
    EXPECT_TRUE(Has(m, "on cuda:0, but this process's CUDA tensors are on cuda:1")) << m;
    EXPECT_TRUE(Has(m, "kolo drives one GPU per process")) << m;
    EXPECT_FALSE(Has(m, "no such CUDA device")) << m;
  }
}

}  // namespace
}  // namespace kolo
