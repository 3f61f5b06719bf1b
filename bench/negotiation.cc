#include "bench/negotiation.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace kolo::bench {
namespace {

struct Row {
  double step_us = 0;
  double cycles_per_step = 0;
  double slow_per_step = 0;
  double neg_us_min = 0;
  double neg_us_max = 0;
  double local_us_max = 0;
  double hits_per_step = 0;
  int64_t wrong = 0;
};

kolo_negotiation_stats_t Stats(const World& world) {
  kolo_negotiation_stats_t s{};
  CheckKolo(world, kolo_negotiation_stats(&s), "kolo_negotiation_stats", nullptr, nullptr);
  return s;
}

Row Measure(const World& world, int n, const NegotiationOptions& options) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back("negotiation." + std::to_string(i));
  std::vector<float> in(n), out(n);
  std::vector<kolo_handle_t> handles(n);
  const int64_t shape[1] = {1};
  Row row;
  auto step = [&] {
    for (int i = 0; i < n; ++i) {
      in[i] = static_cast<float>(world.rank + 1) * static_cast<float>(i % 7 + 1);
      out[i] = -1;
      handles[i] = KoloSubmit(world, names[i].c_str(), &in[i], &out[i], KOLO_FLOAT32, 1, shape,
                              KOLO_OP_SUM);
    }
    for (int i = 0; i < n; ++i) KoloFinish(world, handles[i], names[i].c_str());
  };
  for (int w = 0; w < options.warmup; ++w) step();
  Barrier(world);
  const kolo_negotiation_stats_t before = Stats(world);
  std::vector<double> times;
  for (int s = 0; s < options.steps; ++s) {
    Barrier(world);
    const double t0 = NowSeconds();
    step();
    times.push_back((NowSeconds() - t0) * 1e6);
  }
  const kolo_negotiation_stats_t after = Stats(world);
  // Sum over ranks of (rank+1) = size(size+1)/2.
  const double ranks_sum = world.size * (world.size + 1) / 2.0;
  int64_t wrong = 0;
  for (int i = 0; i < n; ++i) wrong += out[i] != static_cast<float>(ranks_sum * (i % 7 + 1));
  row.wrong = SumOverRanks(world, wrong);
  times = MaxOverRanks(world, times);
  row.step_us = Median(times);
  const double cycles = static_cast<double>(after.cycles - before.cycles);
  const double neg_us = cycles > 0 ? (after.negotiate_ns - before.negotiate_ns) / 1e3 / cycles : 0;
  const std::vector<double> neg_max = MaxOverRanks(world, {neg_us});
  const std::vector<double> neg_min_negated = MaxOverRanks(world, {-neg_us});
  const double local_us =
      cycles > 0 ? ((after.negotiate_ns - before.negotiate_ns) -
                    (after.exchange_ns - before.exchange_ns)) / 1e3 / cycles
                 : 0;
  row.local_us_max = MaxOverRanks(world, {local_us})[0];
  row.neg_us_max = neg_max[0];
  row.neg_us_min = -neg_min_negated[0];
  row.cycles_per_step = cycles / options.steps;
  row.slow_per_step = static_cast<double>(after.slow_cycles - before.slow_cycles) / options.steps;
  row.hits_per_step = static_cast<double>(after.cache_hits - before.cache_hits) / options.steps;
  return row;
}

}  // namespace

bool RunNegotiation(const World& world, const NegotiationOptions& options) {
  const char* set = std::getenv("KOLO_CACHE_CAPACITY");
  const std::string on = set && *set && std::string(set) != "0" ? set : "1024";
  if (world.rank == 0) {
    std::printf("# negotiation: %d ranks, -n %d timed steps after -w %d, one-element float32 "
                "tensors, same names every step\n",
                world.size, options.steps, options.warmup);
    std::printf("# %8s %8s %10s %12s %10s %14s %12s %14s %10s %7s\n", "cache", "tensors",
                "step_us", "cycles/step", "slow/step", "neg_us/cycle", "(max rank)",
                "local_us/cyc", "hits/step", "#wrong");
  }
  bool ok = true;
  for (const std::string& capacity : {on, std::string("0")}) {
    setenv("KOLO_CACHE_CAPACITY", capacity.c_str(), 1);
    CheckKolo(world, kolo_init(), "kolo_init", nullptr, nullptr);
    for (int n : options.tensors) {
      const Row r = Measure(world, n, options);
      ok = ok && r.wrong == 0;
      if (world.rank == 0) {
        std::printf("  %8s %8d %10.1f %12.2f %10.2f %14.1f %12.1f %14.1f %10.1f %7lld\n",
                    capacity.c_str(), n, r.step_us, r.cycles_per_step, r.slow_per_step,
                    r.neg_us_min, r.neg_us_max, r.local_us_max, r.hits_per_step,
                    static_cast<long long>(r.wrong));
        std::fflush(stdout);
        if (options.json != nullptr) {
          nlohmann::json j;
          j["record"] = "row";
          j["mode"] = "negotiation";
          j["cache_capacity"] = capacity;
          j["tensors"] = n;
          j["step_us"] = r.step_us;
          j["cycles_per_step"] = r.cycles_per_step;
          j["slow_per_step"] = r.slow_per_step;
          j["neg_us_per_cycle_min"] = r.neg_us_min;
          j["neg_us_per_cycle_max"] = r.neg_us_max;
          j["local_us_per_cycle_max"] = r.local_us_max;
          j["hits_per_step"] = r.hits_per_step;
          j["wrong"] = r.wrong;
          options.json->Write(j);
        }
      }
    }
    Barrier(world);
    CheckKolo(world, kolo_shutdown(), "kolo_shutdown", nullptr, nullptr);
  }
  if (set) {
    setenv("KOLO_CACHE_CAPACITY", set, 1);
  } else {
    unsetenv("KOLO_CACHE_CAPACITY");
  }
  CheckKolo(world, kolo_init(), "kolo_init", nullptr, nullptr);
  return ok;
}

}  // namespace kolo::bench
