// The fusion executor on its own: pieces that cut across tensor boundaries, empty tensors in
// the middle, widening of float16/bfloat16, integer Average, the direct path, a fused job
// handed whole to an algorithm that takes lists, and a fused job's large tensors run alone by
// one that does not.
#include <gtest/gtest.h>

#include "collectives/host/shm_allreduce.h"
#include "collectives/native_allreduce.h"
#include "fusion/executor.h"
#include "unit/algorithm_check.h"
#include "unit/thread_world.h"
#include "unit/typed_data.h"

namespace kolo {
namespace {

using testing::Load;
using testing::Reference;
using testing::Store;
using testing::Tolerance;
using testing::Value;

struct Param {
  DataType dtype;
  ReduceOp op;
  size_t piece_bytes;
};

class ExecutorTest : public ::testing::TestWithParam<Param> {};

TEST_P(ExecutorTest, FusedPiecesMatchReference) {
  const Param p = GetParam();
  const std::vector<size_t> counts = {3, 0, 17, 1, 0, 64, 5};
  const int ranks = 3;
  const double pre = p.dtype == DataType::kBool ? 1 : 0.5;
  const double post = p.dtype == DataType::kBool ? 1 : 2;
  testing::RunOnThreadWorld(ranks, [&](Communicator& comm) {
    std::vector<std::vector<char>> in, out;
    AllreduceJob job;
    job.dtype = p.dtype;
    job.op = p.op;
    job.prescale = pre;
    job.postscale = post;
    for (size_t c : counts) {
      in.push_back(testing::Buffer(p.dtype, c));
      out.push_back(testing::Buffer(p.dtype, c));
      for (size_t i = 0; i < c; ++i) Store(p.dtype, in.back().data(), i, Value(p.dtype, p.op, comm.Rank(), i));
    }
    for (size_t k = 0; k < counts.size(); ++k) {
      job.tensors.push_back({in[k].data(), out[k].data(), counts[k]});
    }
    FusionExecutor exec(p.piece_bytes);
    ASSERT_TRUE(exec.Prepare().ok());
    NativeAllreduce algo;
    Status s = exec.Run(comm, algo, job);
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (size_t k = 0; k < counts.size(); ++k) {
      for (size_t i = 0; i < counts[k]; ++i) {
        const double want = Reference(p.dtype, p.op, ranks, i, pre, post);
        const double got = Load(p.dtype, out[k].data(), i);
        ASSERT_LE(std::fabs(got - want), Tolerance(p.dtype, want))
            << "rank " << comm.Rank() << " tensor " << k << " index " << i;
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(
    Pieces, ExecutorTest,
    ::testing::Values(Param{DataType::kFloat32, ReduceOp::kSum, 64},
                      Param{DataType::kFloat32, ReduceOp::kAverage, 4096},
                      Param{DataType::kFloat16, ReduceOp::kSum, 40},
                      Param{DataType::kBFloat16, ReduceOp::kAverage, 64},
                      Param{DataType::kInt32, ReduceOp::kAverage, 12},
                      Param{DataType::kInt8, ReduceOp::kMin, 7},
                      Param{DataType::kUInt16, ReduceOp::kMax, 64},
                      Param{DataType::kInt64, ReduceOp::kProduct, 64},
                      Param{DataType::kBool, ReduceOp::kSum, 5},
                      Param{DataType::kFloat64, ReduceOp::kSum, 1 << 20}),
    [](const ::testing::TestParamInfo<Param>& info) {
      return std::string(DataTypeName(info.param.dtype)) + "_" +
             std::string(ReduceOpName(info.param.op)) + "_" +
             std::to_string(info.param.piece_bytes);
    });

TEST(Executor, DirectPathLeavesInputUntouchedWhenOutOfPlace) {
  testing::RunOnThreadWorld(2, [&](Communicator& comm) {
    const size_t n = 1000;
    std::vector<double> in(n), out(n);
    for (size_t i = 0; i < n; ++i) in[i] = comm.Rank() + i;
    AllreduceJob job;
    job.dtype = DataType::kFloat64;
    job.op = ReduceOp::kSum;
    job.prescale = 3;
    job.tensors = {{in.data(), out.data(), n}};
    FusionExecutor exec(64);  // a lone float64 tensor takes the direct path
    NativeAllreduce algo;
    ASSERT_TRUE(exec.Run(comm, algo, job).ok());
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(out[i], 3.0 * (0 + i) + 3.0 * (1 + i)) << i;
      ASSERT_EQ(in[i], comm.Rank() + static_cast<double>(i)) << i;
    }
  });
}

// A shm all-reduce that counts the calls where the executor let it scale the result, or that
// (scales = false) tells the executor it cannot, so that the executor scales by itself.
class ScaleCountingShm : public ShmAllreduce {
 public:
  explicit ScaleCountingShm(bool scales) : scales_(scales) {}
  bool CanRunScaled(DataType dtype) const override {
    return scales_ && ShmAllreduce::CanRunScaled(dtype);
  }
  Status RunWithPostscale(Communicator& comm, const AllreduceArgs& args,
                          double postscale) override {
    ++scaled;
    factor = postscale;
    return ShmAllreduce::RunWithPostscale(comm, args, postscale);
  }
  int scaled = 0;
  double factor = 0;

 private:
  bool scales_;
};

// The direct path hands a floating tensor's one scale (Average's 1/size times the postscale) to
// an algorithm that can apply it in its last pass, and scales by itself otherwise: the same
// bits either way (random data, so the sum and the scale both round), close to the reference
// from every rank's inputs, in place and out of place.
TEST(Executor, DirectPathLetsTheAlgorithmApplyTheScaleWhereItCan) {
  const int ranks = 3;
  testing::RunOnThreadWorld(ranks, "1", [&](Communicator& comm) {
    struct Case {
      DataType dtype;
      ReduceOp op;
      double prescale, postscale;
      bool algorithm_scales;
    };
    for (const Case& c : {Case{DataType::kFloat32, ReduceOp::kAverage, 1.0, 1.0, true},
                          Case{DataType::kFloat64, ReduceOp::kAverage, 1.0, 4.0, true},
                          Case{DataType::kFloat32, ReduceOp::kSum, 1.0, 0.5, true},
                          Case{DataType::kFloat32, ReduceOp::kAverage, 0.25, 6.0, true},
                          Case{DataType::kFloat32, ReduceOp::kSum, 1.0, 1.0, false},
                          Case{DataType::kInt32, ReduceOp::kAverage, 1.0, 1.0, false},
                          Case{DataType::kFloat32, ReduceOp::kMax, 1.0, 2.0, true}}) {
      // 300000 float32 elements: one 2 MiB piece of three slices and a second, shorter one.
      const size_t n = 300000;
      for (bool in_place : {false, true}) {
        const std::string what = std::string(DataTypeName(c.dtype)) + " " +
                                 std::string(ReduceOpName(c.op)) + " prescale " +
                                 std::to_string(c.prescale) + " postscale " +
                                 std::to_string(c.postscale) + (in_place ? " in place" : "");
        std::vector<char> outs[2];
        for (bool scales : {true, false}) {
          std::vector<char> in = testing::Buffer(c.dtype, n);
          std::vector<char>& out = outs[scales ? 0 : 1];
          out = testing::Buffer(c.dtype, n);
          for (size_t i = 0; i < n; ++i) {
            const double v = IsFloatingPoint(c.dtype)
                                 ? testing::RandomUnit(comm.Rank(), i) * (1 + i % 7)
                                 : Value(c.dtype, c.op, comm.Rank(), i);
            Store(c.dtype, in.data(), i, v);
          }
          if (in_place) out = in;
          AllreduceJob job;
          job.dtype = c.dtype;
          job.op = c.op;
          job.prescale = c.prescale;
          job.postscale = c.postscale;
          job.tensors = {{in_place ? out.data() : in.data(), out.data(), n}};
          FusionExecutor exec(1 << 20);
          ScaleCountingShm algo(scales);
          const Status s = exec.Run(comm, algo, job);
          ASSERT_TRUE(s.ok()) << what << ": " << s.ToString();
          EXPECT_EQ(algo.scaled, scales && c.algorithm_scales ? 1 : 0) << what;
          if (scales && c.algorithm_scales) {
            const double size_part = c.op == ReduceOp::kAverage ? 1.0 / ranks : 1.0;
            EXPECT_EQ(algo.factor, c.postscale * size_part) << what;
          }
        }
        EXPECT_EQ(outs[0], outs[1]) << what << ": scaled by the algorithm or by the executor";
        for (size_t i = 0; IsInteger(c.dtype) && i < n; ++i) {
          const double want = Reference(c.dtype, c.op, ranks, i, c.prescale, c.postscale);
          const double got = Load(c.dtype, outs[0].data(), i);
          ASSERT_LE(std::fabs(got - want), Tolerance(c.dtype, want)) << what << " index " << i;
        }
        for (size_t i = 0; IsFloatingPoint(c.dtype) && i < n; i += 997) {
          double want = c.op == ReduceOp::kMax ? -1e300 : 0;
          for (int r = 0; r < ranks; ++r) {
            const double v = testing::RandomUnit(r, i) * (1 + i % 7) * c.prescale;
            want = c.op == ReduceOp::kMax ? std::max(want, v) : want + v;
          }
          want *= c.postscale / (c.op == ReduceOp::kAverage ? ranks : 1);
          const double got = Load(c.dtype, outs[0].data(), i);
          ASSERT_NEAR(got, want, 1e-5 * (1 + std::fabs(want))) << what << " index " << i;
        }
      }
    }
  });
}

// Fills tensors of `counts` elements with Value(dtype, op, rank, i) and returns the job.
AllreduceJob JobOf(DataType dtype, ReduceOp op, const std::vector<size_t>& counts, int rank,
                   bool in_place, std::vector<std::vector<char>>* in,
                   std::vector<std::vector<char>>* out) {
  AllreduceJob job;
  job.dtype = dtype;
  job.op = op;
  for (size_t c : counts) {
    in->push_back(testing::Buffer(dtype, c));
    out->push_back(testing::Buffer(dtype, c));
    for (size_t i = 0; i < c; ++i) Store(dtype, in->back().data(), i, Value(dtype, op, rank, i));
  }
  for (size_t k = 0; k < counts.size(); ++k) {
    void* o = in_place ? (*in)[k].data() : (*out)[k].data();
    job.tensors.push_back({(*in)[k].data(), o, counts[k]});
  }
  return job;
}

// shm, counting how the executor calls it.
class CallCountingShm : public ShmAllreduce {
 public:
  Status Run(Communicator& comm, const AllreduceArgs& args) override {
    ++runs;
    return ShmAllreduce::Run(comm, args);
  }
  Status RunList(Communicator& comm, const std::vector<AllreducePart>& parts, DataType dtype,
                 ReduceOp op, double postscale) override {
    ++lists;
    listed = parts.size();
    return ShmAllreduce::RunList(comm, parts, dtype, op, postscale);
  }
  int runs = 0, lists = 0;
  size_t listed = 0;
};

// A fused job goes whole to an algorithm that takes lists (one RunList naming every tensor, no
// fusion buffer), with the prescale, Average and the postscale applied as on the other paths;
// float16 still goes through the buffer, where it is widened.
TEST(Executor, FusedJobRunsAsOneListWhereTheAlgorithmTakesLists) {
  const int ranks = 3;
  const std::vector<size_t> counts = {3, 0, 70000, 17, 1, 20000};
  testing::RunOnThreadWorld(ranks, "1", [&](Communicator& comm) {
    struct Case {
      DataType dtype;
      ReduceOp op;
      double prescale, postscale;
      bool listed;
    };
    for (const Case& c : {Case{DataType::kFloat32, ReduceOp::kAverage, 1.0, 1.0, true},
                          Case{DataType::kFloat64, ReduceOp::kSum, 0.5, 2.0, true},
                          Case{DataType::kInt32, ReduceOp::kAverage, 1.0, 1.0, true},
                          Case{DataType::kInt64, ReduceOp::kProduct, 1.0, 1.0, true},
                          Case{DataType::kFloat16, ReduceOp::kSum, 1.0, 1.0, false}}) {
      for (bool in_place : {false, true}) {
        const std::string what = std::string(DataTypeName(c.dtype)) + " " +
                                 std::string(ReduceOpName(c.op)) + (in_place ? " in place" : "");
        std::vector<std::vector<char>> in, out;
        AllreduceJob job = JobOf(c.dtype, c.op, counts, comm.Rank(), in_place, &in, &out);
        job.prescale = c.prescale;
        job.postscale = c.postscale;
        FusionExecutor exec(4096);
        CallCountingShm algo;
        const Status s = exec.Run(comm, algo, job);
        ASSERT_TRUE(s.ok()) << what << ": " << s.ToString();
        EXPECT_EQ(algo.lists, c.listed ? 1 : 0) << what;
        EXPECT_EQ(algo.listed, c.listed ? counts.size() : 0) << what;
        if (c.listed) {
          EXPECT_EQ(algo.runs, 0) << what;
        }
        for (size_t k = 0; k < counts.size(); ++k) {
          const char* got = in_place ? in[k].data() : out[k].data();
          for (size_t i = 0; i < counts[k]; ++i) {
            const double want = Reference(c.dtype, c.op, ranks, i, c.prescale, c.postscale);
            ASSERT_LE(std::fabs(Load(c.dtype, got, i) - want), Tolerance(c.dtype, want))
                << what << " rank " << comm.Rank() << " tensor " << k << " index " << i;
            // Out of place, the input is left as it was (the prescale goes into the output).
            if (!in_place) {
              ASSERT_EQ(Load(c.dtype, in[k].data(), i), Value(c.dtype, c.op, comm.Rank(), i))
                  << what << " input of tensor " << k << " index " << i;
            }
          }
        }
      }
    }
  });
}

// An algorithm without lists, counting the elements of each call.
class CallRecordingNative : public NativeAllreduce {
 public:
  Status Run(Communicator& comm, const AllreduceArgs& args) override {
    calls.push_back(args.count);
    return NativeAllreduce::Run(comm, args);
  }
  std::vector<size_t> calls;
};

// A fused job can hold tensors of the direct size or more (the planner fuses them where the
// node's algorithm takes lists); one that does not gets those alone, in their own buffers, and
// the runs of smaller tensors between them packed: here pieces of 4096 B and a direct size of
// 1 KiB (256 float32).
TEST(Executor, LargeTensorsOfAFusedJobRunAloneWhereTheAlgorithmTakesNoLists) {
  const int ranks = 2;
  const std::vector<size_t> counts = {3, 600, 5, 7, 1000, 2, 256};
  testing::RunOnThreadWorld(ranks, [&](Communicator& comm) {
    std::vector<std::vector<char>> in, out;
    AllreduceJob job =
        JobOf(DataType::kFloat32, ReduceOp::kSum, counts, comm.Rank(), false, &in, &out);
    FusionExecutor exec(4096, 1024);
    CallRecordingNative algo;
    const Status s = exec.Run(comm, algo, job);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(algo.calls, (std::vector<size_t>{3, 600, 12, 1000, 2, 256}));
    for (size_t k = 0; k < counts.size(); ++k) {
      for (size_t i = 0; i < counts[k]; ++i) {
        const double want = Reference(DataType::kFloat32, ReduceOp::kSum, ranks, i);
        ASSERT_EQ(Load(DataType::kFloat32, out[k].data(), i), want)
            << "rank " << comm.Rank() << " tensor " << k << " index " << i;
      }
    }
  });
}

}  // namespace
}  // namespace kolo
