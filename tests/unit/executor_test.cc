// The fusion executor on its own: pieces that cut across tensor boundaries, empty tensors in
// the middle, widening of float16/bfloat16, integer Average, and the direct path.
#include <gtest/gtest.h>

#include "collectives/native_allreduce.h"
#include "fusion/executor.h"
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

}  // namespace
}  // namespace kolo
