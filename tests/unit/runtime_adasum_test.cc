// ReduceOp::kAdasum through the runtime's host all-reduce path on N Runtimes in one process:
// the fusion executor's Adasum path (three tensors packed together, float16 widened, scale
// factors) and the whole runtime (grouped and single tensors, 1, 2 and 4 ranks, the four
// floating dtypes, KOLO_ALLREDUCE_ALGO forced), each tensor against the tree reference of
// adasum_reference.h from every rank's known inputs. The refusals: 3 ranks fail on every rank
// naming the count, and the next operation still runs; a joined rank contributes zeros, which
// Adasum leaves out.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "fusion/executor.h"
#include "unit/adasum_reference.h"
#include "unit/thread_world.h"
#include "unit/typed_data.h"

namespace kolo {
namespace {

using testing::AdasumReference;
using testing::FastConfig;
using testing::Load;
using testing::RunOnThreadWorld;
using testing::RunRuntimes;
using testing::Store;
using testing::WaitFor;

// Rank r's element i of tensor `key`, as the dtype stores it (written and read back, so
// bfloat16's shorter significand is in the reference too): correlated across ranks, scaled by
// 2^(r mod 3), at most 4 in magnitude.
double Input(DataType t, uint64_t key, int rank, size_t i) {
  uint64_t h = (key + 1) * 0x9e3779b97f4a7c15ull ^ (i + 1) * 0x94d049bb133111ebull;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  uint64_t own = h ^ (static_cast<uint64_t>(rank) + 1) * 0xc2b2ae3d27d4eb4full;
  own ^= own >> 31;
  own *= 0x94d049bb133111ebull;
  own ^= own >> 29;
  const int k = static_cast<int>(h % 257) - 128 + static_cast<int>(own % 257) - 128;
  char bytes[16];
  Store(t, bytes, 0, std::ldexp(k, (rank % 3) - 8));
  return Load(t, bytes, 0);
}

// The runtime reduces float16/bfloat16 in float32 and rounds once at the end.
double Roundoff(DataType t) {
  switch (t) {
    case DataType::kFloat16:
      return std::ldexp(1, -11);
    case DataType::kBFloat16:
      return std::ldexp(1, -8);
    case DataType::kFloat64:
      return std::ldexp(1, -53);
    default:
      return std::ldexp(1, -24);
  }
}

// Checks `got` (count elements of t) against the reference of tensor `key` over `ranks`, the
// inputs scaled by pre and the result by post. Returns the number of wrong elements.
int CheckTensor(const std::string& what, DataType t, const void* got, uint64_t key, size_t count,
                int ranks, double pre = 1, double post = 1) {
  std::vector<std::vector<double>> inputs(ranks, std::vector<double>(count));
  double scale = 0;
  for (int r = 0; r < ranks; ++r) {
    double largest = 0;
    for (size_t i = 0; i < count; ++i) {
      inputs[r][i] = pre * Input(t, key, r, i);
      largest = std::max(largest, std::fabs(inputs[r][i]));
    }
    scale += largest;
  }
  const std::vector<double> want = AdasumReference(inputs);
  const int levels = static_cast<int>(std::log2(ranks));
  const double wire = t == DataType::kFloat64 ? Roundoff(t) : std::ldexp(1, -24);
  const double tol = (4 * (levels + 1) * wire + 2 * Roundoff(t)) * scale * std::fabs(post);
  int wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    const double v = Load(t, got, i);
    if (!(std::fabs(v - post * want[i]) <= tol) && wrong++ == 0) {
      ADD_FAILURE() << what << ": first wrong index " << i << " of " << count << ": expected "
                    << post * want[i] << ", got " << v << " (tolerance " << tol << ")";
    }
  }
  return wrong;
}

// The executor's Adasum path with three tensors packed into one buffer: each keeps its own dot
// products (the reference is per tensor), float16 is widened, scale factors apply as for Sum.
TEST(AdasumExecutor, FusedTensorsStayApartWithScaleFactors) {
  for (DataType t : {DataType::kFloat16, DataType::kFloat32, DataType::kFloat64}) {
    for (int ranks : {1, 2, 4}) {
      RunOnThreadWorld(ranks, [&](Communicator& comm) {
        const std::vector<size_t> counts = {7, 1, 130};
        std::vector<std::vector<char>> in, out;
        AllreduceJob job;
        job.dtype = t;
        job.op = ReduceOp::kAdasum;
        job.prescale = 0.5;
        job.postscale = 3.0;
        for (size_t k = 0; k < counts.size(); ++k) {
          in.push_back(testing::Buffer(t, counts[k]));
          out.push_back(testing::Buffer(t, counts[k]));
          for (size_t i = 0; i < counts[k]; ++i)
            Store(t, in[k].data(), i, Input(t, k, comm.Rank(), i));
        }
        for (size_t k = 0; k < counts.size(); ++k) {
          job.tensors.push_back(FusedTensor{in[k].data(), out[k].data(), counts[k]});
        }
        FusionExecutor executor(64 << 10);
        AdasumAllreduce adasum;
        const Status s = executor.RunAdasum(comm, adasum, job);
        ASSERT_TRUE(s.ok()) << s.ToString();
        for (size_t k = 0; k < counts.size(); ++k) {
          const std::string what = std::string(DataTypeName(t)) +
                                   " ranks=" + std::to_string(ranks) + " tensor " +
                                   std::to_string(k);
          EXPECT_EQ(CheckTensor(what, t, out[k].data(), k, counts[k], ranks, 0.5, 3.0), 0);
        }
      });
    }
  }
}

Submission Adasum(const std::string& name, const void* in, void* out, DataType t, size_t count) {
  return testing::HostAllreduce(name, in, out, t, {static_cast<int64_t>(count)}, ReduceOp::kAdasum);
}

// On every rank: a group of three tensors (fused by the coordinator) with prescale 0.5 and
// postscale 4, one tensor in place and one with fewer elements than ranks, out of place.
void RunAndCheck(Runtime& rt, DataType t) {
  const int rank = rt.layout().rank, ranks = rt.layout().size;
  const std::string dt(DataTypeName(t));
  const std::vector<size_t> counts = {7, 1, 130, 1023, 3};
  std::vector<std::vector<char>> in, out;
  for (size_t k = 0; k < counts.size(); ++k) {
    in.push_back(testing::Buffer(t, counts[k]));
    out.push_back(testing::Buffer(t, counts[k]));
    for (size_t i = 0; i < counts[k]; ++i) Store(t, in[k].data(), i, Input(t, 10 + k, rank, i));
  }
  std::vector<Submission> group;
  for (size_t k = 0; k < 3; ++k) {
    group.push_back(
        Adasum(dt + ".g" + std::to_string(k), in[k].data(), out[k].data(), t, counts[k]));
    group.back().prescale = 0.5;
    group.back().postscale = 4.0;
  }
  auto grouped = rt.EnqueueGroup(group);
  ASSERT_TRUE(grouped.ok()) << grouped.status().ToString();
  auto in_place = rt.Enqueue(Adasum(dt + ".inplace", in[3].data(), in[3].data(), t, counts[3]));
  ASSERT_TRUE(in_place.ok()) << in_place.status().ToString();
  auto small = rt.Enqueue(Adasum(dt + ".small", in[4].data(), out[4].data(), t, counts[4]));
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  for (size_t k = 0; k < 3; ++k) {
    const Status s = WaitFor(*(*grouped)[k]);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(
        CheckTensor(dt + " group member " + std::to_string(k) + " rank " + std::to_string(rank), t,
                    out[k].data(), 10 + k, counts[k], ranks, 0.5, 4.0),
        0);
  }
  Status s = WaitFor(**in_place);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(CheckTensor(dt + " in place", t, in[3].data(), 13, counts[3], ranks), 0);
  s = WaitFor(**small);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(CheckTensor(dt + " 3 elements", t, out[4].data(), 14, counts[4], ranks), 0);
  for (size_t i = 0; i < counts[4]; ++i) {
    EXPECT_EQ(Load(t, in[4].data(), i), Input(t, 14, rank, i)) << "the input must be untouched";
  }
}

class RuntimeAdasum : public ::testing::TestWithParam<int> {};

TEST_P(RuntimeAdasum, EveryFloatingDtypeMatchesTheTreeReference) {
  RunRuntimes(GetParam(), FastConfig(), [&](Runtime& rt) {
    for (DataType t :
         {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64}) {
      RunAndCheck(rt, t);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, RuntimeAdasum, ::testing::Values(1, 2, 4),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

// KOLO_ALLREDUCE_ALGO forces how the other ops reduce; Adasum still runs its own algorithm.
TEST(RuntimeAdasumForcedAlgorithm, RingForcedStillRunsAdasum) {
  Config config = FastConfig();
  config.allreduce_algo = "ring";
  RunRuntimes(2, config, [&](Runtime& rt) { RunAndCheck(rt, DataType::kFloat32); });
}

TEST(RuntimeAdasumRefusals, ThreeRanksFailOnEveryRankNamingTheCountAndTheNextOpRuns) {
  RunRuntimes(3, FastConfig(), [&](Runtime& rt) {
    std::vector<float> x(8, 1.0f);
    auto h = rt.Enqueue(Adasum("grad", x.data(), x.data(), DataType::kFloat32, x.size()));
    ASSERT_FALSE(h.ok());
    EXPECT_EQ(h.status().code(), StatusCode::kUnimplemented);
    EXPECT_NE(h.status().message().find("allreduce 'grad'"), std::string::npos)
        << h.status().message();
    EXPECT_NE(h.status().message().find("power-of-two"), std::string::npos) << h.status().message();
    EXPECT_NE(h.status().message().find("has 3"), std::string::npos) << h.status().message();
    EXPECT_EQ(x, std::vector<float>(8, 1.0f));
    // Nothing is left waiting: a Sum afterwards completes.
    Submission sum = Adasum("after", x.data(), x.data(), DataType::kFloat32, x.size());
    sum.reduce_op = ReduceOp::kSum;
    auto next = rt.Enqueue(sum);
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    ASSERT_TRUE(WaitFor(**next).ok());
    EXPECT_EQ(x, std::vector<float>(8, 3.0f));
  });
}

// A rank that joined contributes zeros, Adasum's identity: at 2 ranks the other rank's tensor
// comes back as it was, bit for bit.
TEST(RuntimeAdasumJoin, AJoinedRankLeavesTheOtherRanksTensor) {
  RunRuntimes(2, FastConfig(), [&](Runtime& rt) {
    if (rt.layout().rank == 1) {
      ASSERT_TRUE(rt.Join().ok());
      return;
    }
    std::vector<char> in = testing::Buffer(DataType::kFloat32, 33);
    std::vector<char> out = testing::Buffer(DataType::kFloat32, 33);
    for (size_t i = 0; i < 33; ++i)
      Store(DataType::kFloat32, in.data(), i, Input(DataType::kFloat32, 7, 0, i));
    auto h = rt.Enqueue(Adasum("alone", in.data(), out.data(), DataType::kFloat32, 33));
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    ASSERT_TRUE(WaitFor(**h).ok());
    for (size_t i = 0; i < 33; ++i) {
      EXPECT_EQ(Load(DataType::kFloat32, out.data(), i), Input(DataType::kFloat32, 7, 0, i))
          << "index " << i;
    }
    ASSERT_TRUE(rt.Join().ok());
  });
}

}  // namespace
}  // namespace kolo
