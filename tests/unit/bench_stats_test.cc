// kolo-bench's arithmetic (bench/stats.h): bandwidths, the least-squares fit of the calibration,
// block sizing, and the CSV that scripts/plot_algorithms.py reads.
#include "bench/stats.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace kolo::bench {
namespace {

TEST(BenchStatsTest, BandwidthsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(AlgBwGBs(1000000, 1000.0), 1.0);  // 1 MB in 1 ms
  EXPECT_DOUBLE_EQ(AlgBwGBs(64, 0.0), 0.0);
  EXPECT_DOUBLE_EQ(AllreduceBusBwGBs(2.0, 2), 2.0);   // 2(p-1)/p = 1
  EXPECT_DOUBLE_EQ(AllreduceBusBwGBs(2.0, 4), 3.0);   // 1.5
  EXPECT_DOUBLE_EQ(AllreduceBusBwGBs(2.0, 1), 0.0);   // one rank moves nothing
}

TEST(BenchStatsTest, FitRecoversAnExactLine) {
  std::vector<double> x, y;
  for (double n = 8; n <= (1 << 21); n *= 4) {
    x.push_back(n);
    y.push_back(0.75 + n / 5000.0);  // alpha 0.75 us, 5 GB/s
  }
  for (const std::vector<double>& w : {std::vector<double>{}, std::vector<double>(x.size(), 3.0)}) {
    const LineFit fit = FitLine(x, y, w);
    ASSERT_TRUE(fit.ok);
    EXPECT_NEAR(fit.intercept, 0.75, 1e-9);
    EXPECT_NEAR(fit.slope, 1 / 5000.0, 1e-15);
    EXPECT_NEAR(fit.r2, 1.0, 1e-12);
  }
}

TEST(BenchStatsTest, FitMatchesHandComputedLeastSquares) {
  // Points (0,1), (1,3), (2,2): slope 0.5, intercept 1.5; r2 = 0.25.
  const LineFit fit = FitLine({0, 1, 2}, {1, 3, 2});
  ASSERT_TRUE(fit.ok);
  EXPECT_NEAR(fit.slope, 0.5, 1e-12);
  EXPECT_NEAR(fit.intercept, 1.5, 1e-12);
  EXPECT_NEAR(fit.r2, 0.25, 1e-12);
  // Weight 2 on the middle point is the same as listing it twice.
  const LineFit weighted = FitLine({0, 1, 2}, {1, 3, 2}, {1, 2, 1});
  const LineFit doubled = FitLine({0, 1, 1, 2}, {1, 3, 3, 2});
  EXPECT_NEAR(weighted.slope, doubled.slope, 1e-12);
  EXPECT_NEAR(weighted.intercept, doubled.intercept, 1e-12);
  EXPECT_NEAR(weighted.slope, 0.5, 1e-12);
  EXPECT_NEAR(weighted.intercept, 1.75, 1e-12);
}

TEST(BenchStatsTest, FitRefusesDegenerateInput) {
  EXPECT_FALSE(FitLine({}, {}).ok);
  EXPECT_FALSE(FitLine({4}, {1}).ok);
  EXPECT_FALSE(FitLine({4, 4, 4}, {1, 2, 3}).ok);  // no spread in x
  EXPECT_FALSE(FitLine({1, 2}, {1, 2}, {1}).ok);   // too few weights
  EXPECT_FALSE(FitLine({1, 2}, {1, 2}, {0, 0}).ok);
}

TEST(BenchStatsTest, BlockItersKeepsBlocksNearTheTarget) {
  EXPECT_EQ(BlockIters(1.0, 50000, 20), 20);       // small: capped by -n
  EXPECT_EQ(BlockIters(10000, 50000, 20), 5);      // 10 ms calls: 5 per 50 ms block
  EXPECT_EQ(BlockIters(80000, 50000, 20), 1);      // longer than a block: still one
  EXPECT_EQ(BlockIters(0, 50000, 20), 20);         // unknown
  EXPECT_EQ(BlockIters(10, 50000, 0), 1);          // -n 0 still times a call
}

TEST(BenchStatsTest, CsvQuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(CsvField("ring"), "ring");
  EXPECT_EQ(CsvField("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvField("say \"no\""), "\"say \"\"no\"\"\"");
  EXPECT_EQ(CsvField("two\nlines"), "\"two\nlines\"");
}

TEST(BenchStatsTest, CsvRowsAndUnknownFields) {
  AlgorithmRow measured;
  measured.ranks = 2;
  measured.bytes = 1024;
  measured.count = 256;
  measured.algorithm = "ring";
  measured.time_us = 2.5;
  measured.min_us = 2;
  measured.max_us = 3;
  measured.iters = 20;
  measured.algbw = 0.4096;
  measured.busbw = 0.4096;
  measured.vs_mpi = 1.25;
  measured.wrong = 0;
  measured.model_us = 3;
  measured.selected = true;
  AlgorithmRow unsupported;
  unsupported.ranks = 2;
  unsupported.bytes = 1024;
  unsupported.count = 256;
  unsupported.algorithm = "rabenseifner";
  unsupported.supported = false;
  unsupported.reason = "needs a power of two, got 3";
  std::ostringstream out;
  WriteAlgorithmsCsv(out, {"ranks 2"}, {measured, unsupported});
  EXPECT_EQ(out.str(),
            "# ranks 2\n"
            "ranks,bytes,count,algorithm,supported,time_us,min_us,max_us,iters,algbw_gbs,"
            "busbw_gbs,vs_mpi,wrong,model_us,selected,bound_fraction,reason\n"
            "2,1024,256,ring,1,2.5,2,3,20,0.4096,0.4096,1.25,0,3,1,,\n"
            "2,1024,256,rabenseifner,0,,,,,,,,,,0,,\"needs a power of two, got 3\"\n");
}

}  // namespace
}  // namespace kolo::bench

namespace kolo::bench {
namespace {

// nccl-tests' size/count convention and bus bandwidth factors (its src/*.cu GetCollByteCount and
// GetBw), and the names its users type.
TEST(BenchCollectiveTest, LayoutFollowsNcclTests) {
  CollectiveLayout l = LayoutFor(Collective::kAllreduce, 1024, 4, 3);
  EXPECT_EQ(l.count, 256);
  EXPECT_EQ(l.bytes, 1024);
  // 85 per rank, rounded down to 16 bytes: 84 (nccl-tests since v2.13.12).
  l = LayoutFor(Collective::kAllgather, 1024, 4, 3);
  EXPECT_EQ(l.count, 84);
  EXPECT_EQ(l.send, 84);
  EXPECT_EQ(l.recv, 252);
  EXPECT_EQ(l.bytes, 1008);
  l = LayoutFor(Collective::kReducescatter, 1024, 4, 3);
  EXPECT_EQ(l.count, 84);
  EXPECT_EQ(l.send, 252);
  EXPECT_EQ(l.recv, 84);
  EXPECT_EQ(l.bytes, 1008);
  l = LayoutFor(Collective::kAlltoall, 1024, 4, 3);
  EXPECT_EQ(l.count, 84);
  EXPECT_EQ(l.send, 252);
  EXPECT_EQ(l.recv, 252);
  l = LayoutFor(Collective::kBroadcast, 10, 4, 3);
  EXPECT_EQ(l.count, 2);
  EXPECT_EQ(l.bytes, 8);
  // The reviewer's cases: 1 MiB of float at 3 ranks, 8 B at 2 ranks (a row of count 0).
  l = LayoutFor(Collective::kAllgather, 1 << 20, 4, 3);
  EXPECT_EQ(l.count, 87380);
  EXPECT_EQ(l.bytes, 1048560);
  l = LayoutFor(Collective::kAlltoall, 8, 4, 2);
  EXPECT_EQ(l.count, 0);
  EXPECT_EQ(l.bytes, 0);
  // 16 bytes: 16 int8 elements, 2 doubles.
  EXPECT_EQ(LayoutFor(Collective::kAllgather, 100, 1, 3).count, 32);
  EXPECT_EQ(LayoutFor(Collective::kReducescatter, 100, 8, 2).count, 6);
  EXPECT_EQ(LayoutFor(Collective::kAllreduce, 100, 8, 2).count, 12);  // no rounding
}

TEST(BenchCollectiveTest, BusBandwidthFactors) {
  EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kAllreduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kAllgather, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kReducescatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kAlltoall, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kBroadcast, 4), 1.0);
  EXPECT_DOUBLE_EQ(BusBwFactor(Collective::kAllreduce, 1), 0.0);
}

TEST(BenchCollectiveTest, NamesAndProgramNames) {
  Collective c = Collective::kAllreduce;
  EXPECT_TRUE(ParseCollective("reduce_scatter", &c));
  EXPECT_EQ(c, Collective::kReducescatter);
  EXPECT_TRUE(ParseCollective("all_gather_perf", &c));
  EXPECT_EQ(c, Collective::kAllgather);
  EXPECT_TRUE(ParseCollective("alltoall", &c));
  EXPECT_EQ(c, Collective::kAlltoall);
  EXPECT_FALSE(ParseCollective("gather", &c));
  EXPECT_TRUE(CollectiveFromProgramName("/opt/bin/broadcast_perf", &c));
  EXPECT_EQ(c, Collective::kBroadcast);
  EXPECT_FALSE(CollectiveFromProgramName("/opt/bin/kolo-bench", &c));
  EXPECT_STREQ(CollectiveName(Collective::kAllgather), "allgather");
}

}  // namespace
}  // namespace kolo::bench
