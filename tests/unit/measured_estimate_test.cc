// The calibration's timings (CostModel::measured_allreduce, written by `kolo-bench
// --calibrate`): through the tuning file, into each timed algorithm's estimate on the layout
// they were measured on and nowhere else (collectives/select/measured_estimate.h), and into the
// selector's choice.
#include "collectives/select/measured_estimate.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "collectives/host/ring_allreduce.h"
#include "collectives/native_allreduce.h"
#include "collectives/select/cost_model.h"
#include "collectives/select/registry.h"

namespace kolo {
namespace {

constexpr double kMiB = 1 << 20;

// 2 nodes x 2 ranks, host float32 sum, as DescribeCommunicator reports a job placed by node.
SelectionInput TwoByTwo(double bytes, const CostModel* cost) {
  SelectionInput in;
  in.bytes = static_cast<size_t>(bytes);
  in.count = in.bytes / 4;
  in.ranks = 4;
  in.backend = "mpi";
  in.nodes = 2;
  in.max_local_size = 2;
  in.min_local_size = 2;
  in.has_node_context = true;
  in.cost = cost;
  return in;
}

CostModel Links() {
  CostModel m;
  m.intra = {1.0, 1.0 / 5000.0};
  m.inter = {20.0, 1.0 / 100.0};
  m.inter_sharing = 2;
  return m;
}

MeasuredAllreduce TwoByTwoTimes(std::vector<double> bytes,
                                std::map<std::string, std::vector<double>, std::less<>> micros) {
  MeasuredAllreduce m;
  m.backend = "mpi";
  m.ranks = 4;
  m.nodes = 2;
  m.local_size = 2;
  m.bytes = std::move(bytes);
  m.micros = std::move(micros);
  return m;
}

// On the timed layout the estimate is each time at its size; in between, the formula times
// measured / formula, interpolated in log(bytes); beyond, the nearest size's ratio. For the
// library's all-reduce and for one of kolo's own alike.
TEST(MeasuredEstimate, FollowsTheTimesOnTheirLayout) {
  const CostModel plain = Links();
  NativeAllreduce library;
  RingAllreduce ring;
  for (const AllreduceAlgorithm* algo :
       {static_cast<AllreduceAlgorithm*>(&library), static_cast<AllreduceAlgorithm*>(&ring)}) {
    const auto formula = [&](double bytes) {
      return algo->EstimateMicros(TwoByTwo(bytes, &plain));
    };
    // Timed: twice the formula at 1 MiB, three times at 4 MiB.
    CostModel tuned = plain;
    tuned.measured_allreduce =
        TwoByTwoTimes({kMiB, 4 * kMiB},
                      {{std::string(algo->Name()), {2 * formula(kMiB), 3 * formula(4 * kMiB)}}});
    const auto tuned_us = [&](double bytes) {
      return MeasuredEstimate(*algo, TwoByTwo(bytes, &tuned));
    };
    for (auto [bytes, ratio] : {std::pair{kMiB, 2.0}, std::pair{4 * kMiB, 3.0},
                                std::pair{2 * kMiB, 2.5},  // halfway in log(bytes)
                                std::pair{64 * 1024.0, 2.0}, std::pair{64 * kMiB, 3.0}}) {
      EXPECT_NEAR(tuned_us(bytes), ratio * formula(bytes), 1e-9 * formula(bytes))
          << algo->Name() << " at " << bytes << " B";
    }
  }
}

// Elsewhere the formula: another layout (4 nodes of 1, 8 ranks, uneven nodes), device buffers,
// another transport, an algorithm the calibration did not time. A timing says nothing about other
// links.
TEST(MeasuredEstimate, ElsewhereTheFormula) {
  const CostModel plain = Links();
  CostModel tuned = plain;
  tuned.measured_allreduce = TwoByTwoTimes({kMiB}, {{"mpi", {1.0}}});
  NativeAllreduce library;
  RingAllreduce ring;
  SelectionInput a = TwoByTwo(kMiB, &plain), b = TwoByTwo(kMiB, &tuned);
  EXPECT_DOUBLE_EQ(MeasuredEstimate(library, b), 1.0);
  EXPECT_DOUBLE_EQ(MeasuredEstimate(ring, b), ring.EstimateMicros(a));  // not timed
  for (auto [nodes, max_local, min_local, ranks] :
       {std::tuple{4, 1, 1, 4}, std::tuple{4, 2, 2, 8}, std::tuple{2, 3, 1, 4}}) {
    a.nodes = b.nodes = nodes;
    a.max_local_size = b.max_local_size = max_local;
    a.min_local_size = b.min_local_size = min_local;
    a.ranks = b.ranks = ranks;
    EXPECT_DOUBLE_EQ(MeasuredEstimate(library, b), library.EstimateMicros(a))
        << nodes << " nodes of " << min_local << "-" << max_local;
  }
  b = TwoByTwo(kMiB, &tuned);
  b.memory = MemoryKind::kCuda;
  EXPECT_FALSE(MeasuredOnLayout(tuned.measured_allreduce, b));
  // The same layout over another transport: times over MPI do not carry over.
  a = TwoByTwo(kMiB, &plain);
  b = TwoByTwo(kMiB, &tuned);
  a.backend = b.backend = "ucx";
  EXPECT_DOUBLE_EQ(MeasuredEstimate(library, b), library.EstimateMicros(a));
}

// The times decide the ranking: an algorithm the formulas do not pick, timed 8x faster than the
// formulas' best, is auto's pick; the formulas' pick, timed 8x slower than the runner-up, is not.
TEST(MeasuredEstimate, TheSelectorFollowsTheTimes) {
  const CostModel plain = Links();
  AllreduceSelector by_formula("", plain);
  const SelectionInput in = TwoByTwo(4 * kMiB, nullptr);
  auto formula_pick = by_formula.Select(in);
  ASSERT_TRUE(formula_pick.ok()) << formula_pick.status().ToString();
  const std::string first((*formula_pick)->Name());
  std::vector<std::pair<std::string, double>> ranked;
  for (const auto& [algo, us] : by_formula.Rank(in)) {
    if (us >= 0) ranked.emplace_back(std::string(algo->Name()), us);
  }
  std::sort(ranked.begin(), ranked.end(),
            [](const auto& x, const auto& y) { return x.second < y.second; });
  ASSERT_GE(ranked.size(), 3u);
  ASSERT_EQ(ranked[0].first, first);
  // Timed at 1 and 16 MiB with one ratio to the formula, so at 4 MiB the estimate is that ratio
  // times the formula.
  const auto times_for = [&](const std::string& name, double us_at_4mib) {
    AllreduceAlgorithm* algo = by_formula.Find(name);
    const double ratio = us_at_4mib / algo->EstimateMicros(TwoByTwo(4 * kMiB, &plain));
    return std::vector<double>{ratio * algo->EstimateMicros(TwoByTwo(kMiB, &plain)),
                               ratio * algo->EstimateMicros(TwoByTwo(16 * kMiB, &plain))};
  };
  const std::string last = ranked.back().first;
  CostModel faster = plain;
  faster.measured_allreduce =
      TwoByTwoTimes({kMiB, 16 * kMiB}, {{last, times_for(last, ranked[0].second / 8)}});
  const AllreduceSelector by_faster("", faster);  // owns the algorithm Select returns
  auto picked = by_faster.Select(in);
  ASSERT_TRUE(picked.ok());
  EXPECT_EQ((*picked)->Name(), last);
  CostModel slower = plain;
  slower.measured_allreduce =
      TwoByTwoTimes({kMiB, 16 * kMiB}, {{first, times_for(first, ranked[1].second * 8)}});
  const AllreduceSelector by_slower("", slower);
  picked = by_slower.Select(in);
  ASSERT_TRUE(picked.ok());
  EXPECT_EQ((*picked)->Name(), ranked[1].first);
}

// Through the tuning file and back; malformed entries are refused naming the key and the fault.
TEST(MeasuredEstimate, TheTuningFileCarriesTheTimes) {
  const std::string path =
      ::testing::TempDir() + "kolo_tuning_measured_" + std::to_string(getpid()) + ".json";
  CostModel m;
  m.measured_allreduce = TwoByTwoTimes(
      {4096, kMiB, 16 * kMiB}, {{"mpi", {30.5, 2100.25, 41000}}, {"ring", {41, 2500, 39000.5}}});
  ASSERT_TRUE(m.Save(path).ok());
  auto loaded = CostModel::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->measured_allreduce.backend, "mpi");
  EXPECT_EQ(loaded->measured_allreduce.ranks, 4);
  EXPECT_EQ(loaded->measured_allreduce.nodes, 2);
  EXPECT_EQ(loaded->measured_allreduce.local_size, 2);
  EXPECT_EQ(loaded->measured_allreduce.bytes, m.measured_allreduce.bytes);
  EXPECT_EQ(loaded->measured_allreduce.micros, m.measured_allreduce.micros);
  const std::pair<const char*, const char*> bad[] = {
      {R"({"measured_allreduce": {"backend": "mpi", "ranks": 4, "nodes": 2, "local_size": 2,
           "bytes": [4096, 1024], "micros": {"mpi": [1, 2]}}})",
       "strictly ascending"},
      {R"({"measured_allreduce": {"backend": "mpi", "ranks": 4, "nodes": 2, "local_size": 2,
           "bytes": [4096], "micros": {"ring": [1, 2]}}})",
       "\"micros\" of ring has 2 times for 1 sizes"},
      {R"({"measured_allreduce": {"backend": "mpi", "ranks": 4, "nodes": 3, "local_size": 2,
           "bytes": [4096], "micros": {}}})",
       "3 nodes of 2 ranks are not 4 ranks"},
      {R"({"measured_allreduce": {"backend": "mpi", "ranks": 4, "nodes": 2, "local_size": 2,
           "bytes": [4096], "micros": {"mpi": [-1]}}})",
       "\"micros\" of mpi must hold positive numbers"},
      {R"({"measured_allreduce": {"backend": "mpi", "ranks": 4, "nodes": 2, "local_size": 2,
           "bytes": [4096], "micros": [1]}})",
       "\"micros\" must be an object"},
      {R"({"measured_allreduce": {"backend": "mpi", "nodes": 2, "local_size": 2, "bytes": [1],
           "micros": {}}})",
       "\"ranks\" must be a positive integer"},
      {R"({"measured_allreduce": {"ranks": 4, "nodes": 2, "local_size": 2, "bytes": [1],
           "micros": {}}})",
       "\"backend\" must name the transport"},
  };
  for (const auto& [text, why] : bad) {
    {
      std::ofstream out(path);
      out << text;
    }
    auto refused = CostModel::Load(path);
    ASSERT_FALSE(refused.ok()) << text;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("measured_allreduce"), std::string::npos)
        << refused.status().message();
    EXPECT_NE(refused.status().message().find(why), std::string::npos)
        << refused.status().message();
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace kolo
