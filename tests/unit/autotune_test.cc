// Autotune: the search finds the best point of synthetic score surfaces (so a real job's choice
// depends only on its measurements), writes its log, refuses an unwritable log path, and in a
// thread world every rank ends with the same setting while results stay right.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>

#include "runtime/negotiation/autotune.h"
#include "unit/thread_world.h"

namespace kolo {
namespace {

using Clock = std::chrono::steady_clock;

// Drives a tuner with a synthetic throughput (bytes/s as a function of the setting in force)
// until it is done; returns the final setting.
TunedParams Drive(const std::function<double(const TunedParams&)>& throughput,
                  AutotuneOptions options = {}) {
  Autotuner tuner(options, TunedParams{64 << 20, 1.0});
  EXPECT_TRUE(tuner.Open().ok());
  TunedParams current = tuner.current();
  auto now = Clock::now();
  for (int cycle = 0; cycle < 100000 && !tuner.done(); ++cycle) {
    const int64_t bytes = 1 << 20;
    now += std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(bytes / throughput(current)));
    auto next = tuner.Record(bytes, now);
    if (next) current = *next;
  }
  EXPECT_TRUE(tuner.done());
  EXPECT_EQ(current, tuner.best());
  return current;
}

TEST(Autotune, FindsTheBestPointOfSeparableSurfaces) {
  // Peak at 16 MiB and 2 ms.
  auto peak = [](const TunedParams& p) {
    const double t = std::log2(1.0 + p.fusion_threshold_bytes / double(1 << 20));
    return 1e9 / (1 + std::pow(t - std::log2(17.0), 2)) / (1 + std::pow(p.cycle_time_ms - 2, 2));
  };
  TunedParams best = Drive(peak);
  EXPECT_EQ(best.fusion_threshold_bytes, 16 << 20);
  EXPECT_EQ(best.cycle_time_ms, 2.0);
  // Fusion off is best, fast cycles best.
  auto off = [](const TunedParams& p) {
    return 1e9 / (1 + p.fusion_threshold_bytes / double(1 << 20)) / p.cycle_time_ms;
  };
  best = Drive(off);
  EXPECT_EQ(best.fusion_threshold_bytes, 0);
  EXPECT_EQ(best.cycle_time_ms, 0.5);
}

TEST(Autotune, WritesEveryTrialToTheLog) {
  const std::string path =
      ::testing::TempDir() + "/kolo_autotune_test_" + std::to_string(getpid()) + ".csv";
  AutotuneOptions options;
  options.log_path = path;
  Drive([](const TunedParams& p) { return 1e9 + p.fusion_threshold_bytes; }, options);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string log = text.str();
  EXPECT_EQ(log.rfind("trial,fusion_threshold_bytes,cycle_time_ms,score_bytes_per_s,samples\n", 0),
            0u) << log;
  int lines = 0;
  for (char c : log) lines += c == '\n';
  EXPECT_EQ(lines, 1 + 6 + 4 + 1);  // header, 6 thresholds, 4 other cycle times, best
  EXPECT_NE(log.find("best,134217728,"), std::string::npos) << log;
  std::remove(path.c_str());
}

TEST(Autotune, AnUnwritableLogIsAClearError) {
  AutotuneOptions options;
  options.log_path = "/nonexistent-dir/autotune.csv";
  Autotuner tuner(options, TunedParams{1 << 20, 1.0});
  Status s = tuner.Open();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("KOLO_AUTOTUNE_LOG='/nonexistent-dir/autotune.csv': cannot open"),
            std::string::npos) << s.message();
}

TEST(Autotune, EveryRankEndsWithTheSameSetting) {
  Config config = testing::FastConfig();
  config.autotune = true;
  config.autotune_warmup_samples = 1;
  config.autotune_steps_per_sample = 2;
  const int n = 3;
  std::vector<NegotiationStats> final_stats(n);
  testing::RunRuntimes(n, config, [&](Runtime& rt) {
    const int r = rt.layout().rank;
    std::vector<float> in(1000), out(1000);
    for (int step = 0; step < 400; ++step) {
      std::vector<std::shared_ptr<Handle>> handles;
      for (int t = 0; t < 4; ++t) {
        Submission s;
        s.name = "t" + std::to_string(t);
        for (int i = 0; i < 250; ++i) in[250 * t + i] = static_cast<float>(r + t);
        s.shape = {250};  // each tensor its own quarter of the buffers
        s.input = in.data() + 250 * t;
        s.output = out.data() + 250 * t;
        auto h = rt.Enqueue(s);
        ASSERT_TRUE(h.ok()) << h.status().ToString();
        handles.push_back(*h);
      }
      for (auto& h : handles) ASSERT_TRUE(testing::WaitFor(*h).ok());
      for (int t = 0; t < 4; ++t) {
        ASSERT_EQ(out[250 * t], static_cast<float>(n * t + n * (n - 1) / 2)) << "step " << step;
      }
    }
    ASSERT_TRUE(rt.Barrier().ok());
    final_stats[r] = rt.negotiation_stats();
  });
  EXPECT_TRUE(final_stats[0].autotune_done);
  for (int r = 1; r < n; ++r) {
    EXPECT_EQ(final_stats[r].fusion_threshold_bytes, final_stats[0].fusion_threshold_bytes);
    EXPECT_EQ(final_stats[r].cycle_time_ms, final_stats[0].cycle_time_ms);
  }
}

}  // namespace
}  // namespace kolo
