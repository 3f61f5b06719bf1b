// The flat point-to-point all-reduces beyond what allreduce_algorithms_test.cc covers for
// every algorithm: the ring's many-segment pipeline forced on small buffers (the test-only
// segment size, as Gloo's maxSegmentSize), and their cost formulas against the papers'.
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>

#include "collectives/host/rabenseifner_allreduce.h"
#include "collectives/host/recursive_doubling_allreduce.h"
#include "collectives/host/ring_allreduce.h"
#include "unit/algorithm_check.h"
#include "unit/thread_world.h"

namespace kolo::testing {
namespace {

class RingSegmentsTest : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

// Segments of one element up to a few: every chunk becomes many segments, chunks of unequal
// length get empty trailing segments, and K = 1 (no overlap) appears when chunks are short.
TEST_P(RingSegmentsTest, ManySegmentsMatchReference) {
  const auto [ranks, segment_bytes] = GetParam();
  std::mutex mu;
  std::vector<std::string> failures;
  RunOnThreadWorld(ranks, [&](Communicator& comm) {
    RingAllreduce ring;
    ring.set_segment_bytes_for_testing(segment_bytes);
    std::vector<std::string> mine;
    int index = 0;
    for (DataType t :
         {DataType::kInt8, DataType::kFloat16, DataType::kFloat32, DataType::kFloat64}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
        for (size_t count : AlgorithmCounts(ranks, /*with_large=*/false)) {
          if (segment_bytes < 8 && count > 1023) continue;  // thousands of tiny messages
          CaseResult r = CheckAllreduceCase(comm, ring, t, op, count, (index++ % 2) == 0);
          if (!r.ran) r.failure = "ring declined: " + r.declined_why;
          if (!r.failure.empty())
            mine.push_back(r.failure + " segment_bytes=" + std::to_string(segment_bytes));
        }
      }
    }
    std::string f = CheckRandomFloat32Sum(comm, ring, 1000);
    if (!f.empty()) mine.push_back(f);
    std::lock_guard<std::mutex> lock(mu);
    for (auto& m : mine) {
      if (failures.size() < 20) failures.push_back(m);
    }
  });
  for (const std::string& f : failures) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(All, RingSegmentsTest,
                         ::testing::Combine(::testing::Values(2, 3, 5),
                                            ::testing::Values(size_t{1}, size_t{24}, size_t{256})),
                         [](const auto& info) {
                           return "np" + std::to_string(std::get<0>(info.param)) + "_seg" +
                                  std::to_string(std::get<1>(info.param));
                         });

SelectionInput Input(int ranks, size_t bytes, const CostModel& cost) {
  SelectionInput in;
  in.ranks = ranks;
  in.bytes = bytes;
  in.count = bytes / 4;
  in.dtype = DataType::kFloat32;
  in.cost = &cost;
  return in;
}

TEST(FlatCostTest, FormulasOfThePapers) {
  CostModel cost;
  const double a = cost.intra.alpha_us, b = cost.intra.beta_us, g = cost.gamma_us;
  const double n = 64 << 10;  // one segment per chunk: the ring's paper formula exactly
  RingAllreduce ring;
  RecursiveDoublingAllreduce rd;
  RabenseifnerAllreduce rab;
  EXPECT_DOUBLE_EQ(ring.EstimateMicros(Input(4, n, cost)),
                   6 * a + 2 * 3.0 / 4 * n * b + 3.0 / 4 * n * g);
  EXPECT_DOUBLE_EQ(rd.EstimateMicros(Input(4, n, cost)), 2 * (a + n * b + n * g));
  EXPECT_DOUBLE_EQ(rab.EstimateMicros(Input(4, n, cost)),
                   4 * a + 2 * 3.0 / 4 * n * b + 3.0 / 4 * n * g);
  // p = 5 folds onto 4: two more steps.
  EXPECT_DOUBLE_EQ(rd.EstimateMicros(Input(5, n, cost)), 3 * (a + n * b + n * g) + a + n * b);
  EXPECT_DOUBLE_EQ(rab.EstimateMicros(Input(5, n, cost)),
                   4 * a + 2 * 3.0 / 4 * n * b + 3.0 / 4 * n * g + 2 * a + 2 * n * b + n * g);
  // Every segment is a message: 1 MiB chunks of 256 KiB segments cost 4x the latency.
  EXPECT_DOUBLE_EQ(
      ring.EstimateMicros(Input(2, 2 << 20, cost)) - ring.EstimateMicros(Input(2, 256 << 10, cost)),
      3 * 2 * a + 2 * 0.5 * ((2 << 20) - (256 << 10)) * b + 0.5 * ((2 << 20) - (256 << 10)) * g);
  for (int p : {1}) {
    EXPECT_EQ(ring.EstimateMicros(Input(p, n, cost)), 0);
    EXPECT_EQ(rd.EstimateMicros(Input(p, n, cost)), 0);
    EXPECT_EQ(rab.EstimateMicros(Input(p, n, cost)), 0);
  }
}

// Across nodes whose ranks share one NIC (inter_sharing 4): the ring over ranks placed by node
// has one flow per node across, which gets the NIC alone: inter's beta / 4. Recursive doubling's
// partners 1 and 2 apart share a node (intra); at 4 apart every rank crosses at once (inter as
// it is). Rabenseifner likewise, with n/2, n/4 and n/8 per step of each half.
TEST(FlatCostTest, TheRingAcrossNodesHasTheNicToItself) {
  CostModel cost;
  cost.inter = {10.0, 1.0 / 500.0};  // each rank's share while all 4 of its node send
  cost.inter_sharing = 4;
  const double n = 64 << 10;
  SelectionInput in = Input(8, n, cost);
  in.nodes = 2;
  in.max_local_size = in.min_local_size = 4;
  RingAllreduce ring;
  RecursiveDoublingAllreduce rd;
  const double a = 10.0, b = 1.0 / 2000.0, g = cost.gamma_us;
  EXPECT_DOUBLE_EQ(ring.EstimateMicros(in), 14 * a + 2 * 7.0 / 8 * n * b + 7.0 / 8 * n * g);
  const double ai = cost.intra.alpha_us, bi = cost.intra.beta_us;
  EXPECT_DOUBLE_EQ(rd.EstimateMicros(in), 2 * (ai + n * bi + n * g) + (a + n / 500.0 + n * g));
  RabenseifnerAllreduce rab;
  EXPECT_DOUBLE_EQ(rab.EstimateMicros(in), 2 * ai + 2 * (n / 2) * bi + (n / 2) * g +      //
                                               2 * ai + 2 * (n / 4) * bi + (n / 4) * g +  //
                                               2 * a + 2 * (n / 8) / 500.0 + (n / 8) * g);
  cost.inter_sharing = 1;  // a NIC per rank: the ring's flow gets what every rank gets
  EXPECT_DOUBLE_EQ(ring.EstimateMicros(in), 14 * a + 2 * 7.0 / 8 * n / 500.0 + 7.0 / 8 * n * g);
  // A link that carries one flow each way slower than one flow alone: the ring's flow out of
  // the node shares it with the flow coming in. Recursive doubling's inter is measured swapping.
  cost.inter_sharing = 4;
  cost.inter_duplex = 1.25;
  EXPECT_DOUBLE_EQ(ring.EstimateMicros(in),
                   14 * a + 2 * 7.0 / 8 * n * (1.25 / 2000.0) + 7.0 / 8 * n * g);
  EXPECT_DOUBLE_EQ(rd.EstimateMicros(in), 2 * (ai + n * bi + n * g) + (a + n / 500.0 + n * g));
}

TEST(FlatCostTest, RecursiveDoublingForSmallRingOrRabenseifnerForLarge) {
  CostModel cost;
  RingAllreduce ring;
  RecursiveDoublingAllreduce rd;
  RabenseifnerAllreduce rab;
  for (int p : {4, 7, 16}) {
    EXPECT_LT(rd.EstimateMicros(Input(p, 64, cost)), ring.EstimateMicros(Input(p, 64, cost)));
    EXPECT_LT(rd.EstimateMicros(Input(p, 64, cost)), rab.EstimateMicros(Input(p, 64, cost)));
    const SelectionInput big = Input(p, 64 << 20, cost);
    EXPECT_LT(std::min(ring.EstimateMicros(big), rab.EstimateMicros(big)), rd.EstimateMicros(big));
  }
}

TEST(FlatCostTest, DeclineOnlyWhatTheKernelsCannotDo) {
  CostModel cost;
  SelectionInput in = Input(3, 1024, cost);
  RingAllreduce ring;
  RecursiveDoublingAllreduce rd;
  RabenseifnerAllreduce rab;
  for (AllreduceAlgorithm* algo : std::vector<AllreduceAlgorithm*>{&ring, &rd, &rab}) {
    for (ReduceOp op : KernelOps()) {
      in.op = op;
      EXPECT_TRUE(algo->Supports(in).ok()) << algo->Name();
    }
    in.op = ReduceOp::kAdasum;
    Status s = algo->Supports(in);
    EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
    EXPECT_NE(s.message().find(std::string(algo->Name())), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace kolo::testing
