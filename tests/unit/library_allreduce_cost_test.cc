// The library all-reduce's measured times (CostModel::library_allreduce, written by
// `kolo-bench --calibrate`): through the tuning file, into NativeAllreduce's estimate on the
// layout they were measured on and nowhere else, and into the selector's choice.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "collectives/native_allreduce.h"
#include "collectives/select/cost_model.h"
#include "collectives/select/registry.h"

namespace kolo {
namespace {

// 2 nodes x 2 ranks, host float32 sum, as DescribeCommunicator reports a job placed by node.
SelectionInput TwoByTwo(size_t bytes, const CostModel* cost) {
  SelectionInput in;
  in.bytes = bytes;
  in.count = bytes / 4;
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

MeasuredAllreduce TwoByTwoTimes(std::vector<double> bytes, std::vector<double> micros) {
  MeasuredAllreduce m;
  m.ranks = 4;
  m.nodes = 2;
  m.local_size = 2;
  m.bytes = std::move(bytes);
  m.micros = std::move(micros);
  return m;
}

constexpr double kMiB = 1 << 20;

// On the measured layout the estimate is each measurement at its size; in between, the
// formula times measured / formula, interpolated in log(bytes); beyond, the nearest ratio.
TEST(LibraryAllreduceCost, EstimateFollowsTheMeasurementOnItsLayout) {
  const CostModel plain = Links();
  NativeAllreduce native;
  const auto formula = [&](double bytes) {
    return native.EstimateMicros(TwoByTwo(static_cast<size_t>(bytes), &plain));
  };
  // Measured: twice the formula at 1 MiB, three times at 4 MiB.
  CostModel tuned = plain;
  tuned.library_allreduce =
      TwoByTwoTimes({kMiB, 4 * kMiB}, {2 * formula(kMiB), 3 * formula(4 * kMiB)});
  const auto tuned_us = [&](double bytes) {
    return native.EstimateMicros(TwoByTwo(static_cast<size_t>(bytes), &tuned));
  };
  EXPECT_NEAR(tuned_us(kMiB), 2 * formula(kMiB), 1e-9 * formula(kMiB));
  EXPECT_NEAR(tuned_us(4 * kMiB), 3 * formula(4 * kMiB), 1e-9 * formula(4 * kMiB));
  // 2 MiB is halfway between 1 and 4 MiB in log(bytes): ratio 2.5.
  EXPECT_NEAR(tuned_us(2 * kMiB), 2.5 * formula(2 * kMiB), 1e-9 * formula(2 * kMiB));
  EXPECT_NEAR(tuned_us(64 << 10), 2 * formula(64 << 10), 1e-9 * formula(64 << 10));
  EXPECT_NEAR(tuned_us(64 * kMiB), 3 * formula(64 * kMiB), 1e-9 * formula(64 * kMiB));
}

// Another layout (4 nodes of 1, 8 ranks, uneven nodes) keeps the formula: the measurement says
// nothing about how the library shares other links.
TEST(LibraryAllreduceCost, OtherLayoutsKeepTheFormula) {
  const CostModel plain = Links();
  CostModel tuned = plain;
  tuned.library_allreduce = TwoByTwoTimes({kMiB}, {1.0});
  NativeAllreduce native;
  SelectionInput a = TwoByTwo(kMiB, &plain), b = TwoByTwo(kMiB, &tuned);
  EXPECT_DOUBLE_EQ(native.EstimateMicros(b), 1.0);
  for (auto [nodes, max_local, min_local, ranks] :
       {std::tuple{4, 1, 1, 4}, std::tuple{4, 2, 2, 8}, std::tuple{2, 3, 1, 4}}) {
    a.nodes = b.nodes = nodes;
    a.max_local_size = b.max_local_size = max_local;
    a.min_local_size = b.min_local_size = min_local;
    a.ranks = b.ranks = ranks;
    EXPECT_DOUBLE_EQ(native.EstimateMicros(b), native.EstimateMicros(a))
        << nodes << " nodes of " << min_local << "-" << max_local;
  }
}

// The measurement decides the library's rank: measured 8x faster than the best of kolo's own
// algorithms, auto picks it; 8x slower than that, one of kolo's own.
TEST(LibraryAllreduceCost, TheSelectorFollowsTheMeasurement) {
  const CostModel plain = Links();
  AllreduceSelector by_formula("", plain);
  const SelectionInput in = TwoByTwo(4 * kMiB, nullptr);
  double best_own_us = -1;
  for (const auto& [algo, us] : by_formula.Rank(in)) {
    if (algo->Name() != "mpi" && us >= 0 && (best_own_us < 0 || us < best_own_us)) {
      best_own_us = us;
    }
  }
  ASSERT_GT(best_own_us, 0);
  for (const double factor : {1.0 / 8, 8.0}) {
    CostModel tuned = plain;
    // Measured at 1 and 16 MiB with the same ratio to the formula at both, so the estimate at
    // 4 MiB is that ratio times the formula: set it to factor x the best of kolo's own.
    NativeAllreduce native;
    const double at4 = native.EstimateMicros(TwoByTwo(4 * kMiB, &plain));
    const double ratio = factor * best_own_us / at4;
    tuned.library_allreduce = TwoByTwoTimes(
        {kMiB, 16 * kMiB}, {ratio * native.EstimateMicros(TwoByTwo(kMiB, &plain)),
                            ratio * native.EstimateMicros(TwoByTwo(16 * kMiB, &plain))});
    AllreduceSelector by_measurement("", tuned);
    auto picked = by_measurement.Select(in);
    ASSERT_TRUE(picked.ok()) << picked.status().ToString();
    if (factor < 1) {
      EXPECT_EQ((*picked)->Name(), "mpi");
    } else {
      EXPECT_NE((*picked)->Name(), "mpi");
    }
  }
}

// Through the tuning file and back; malformed entries are refused naming the key and the fault.
TEST(LibraryAllreduceCost, TuningFileCarriesTheMeasurement) {
  const std::string path = ::testing::TempDir() + "kolo_tuning_library.json";
  CostModel m;
  m.library_allreduce = TwoByTwoTimes({4096, kMiB, 16 * kMiB}, {30.5, 2100.25, 41000});
  ASSERT_TRUE(m.Save(path).ok());
  auto loaded = CostModel::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->library_allreduce.ranks, 4);
  EXPECT_EQ(loaded->library_allreduce.nodes, 2);
  EXPECT_EQ(loaded->library_allreduce.local_size, 2);
  EXPECT_EQ(loaded->library_allreduce.bytes, m.library_allreduce.bytes);
  EXPECT_EQ(loaded->library_allreduce.micros, m.library_allreduce.micros);
  const std::pair<const char*, const char*> bad[] = {
      {R"({"library_allreduce": {"ranks": 4, "nodes": 2, "local_size": 2,
           "bytes": [4096, 1024], "micros": [1, 2]}})",
       "strictly ascending"},
      {R"({"library_allreduce": {"ranks": 4, "nodes": 2, "local_size": 2,
           "bytes": [4096], "micros": [1, 2]}})",
       "as long as each other"},
      {R"({"library_allreduce": {"ranks": 4, "nodes": 3, "local_size": 2,
           "bytes": [4096], "micros": [1]}})",
       "3 nodes of 2 ranks are not 4 ranks"},
      {R"({"library_allreduce": {"ranks": 4, "nodes": 2, "local_size": 2,
           "bytes": [4096], "micros": [-1]}})",
       "\"micros\" must hold positive numbers"},
      {R"({"library_allreduce": {"nodes": 2, "local_size": 2, "bytes": [1], "micros": [1]}})",
       "\"ranks\" must be a positive integer"},
  };
  for (const auto& [text, why] : bad) {
    {
      std::ofstream out(path);
      out << text;
    }
    auto refused = CostModel::Load(path);
    ASSERT_FALSE(refused.ok()) << text;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("library_allreduce"), std::string::npos)
        << refused.status().message();
    EXPECT_NE(refused.status().message().find(why), std::string::npos)
        << refused.status().message();
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace kolo
