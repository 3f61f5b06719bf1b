// Randomised negotiation over the thread world, as the runtime drives it: every rank has its own
// TensorQueue (ids, serials, sweeps) and Controller (cache), submits names in its own random
// order and timing, and executes each cycle's Responses by id or by name as Runtime::Execute
// does. Every rank must derive the same Responses in the same order (the same tensors, each
// rank's k-th submission of a name with the others' k-th), whatever each rank asks for names.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <sstream>

#include "runtime/negotiation/controller.h"
#include "runtime/tensor_queue.h"
#include "unit/thread_world.h"

namespace kolo {
namespace {

struct FuzzParams {
  int ranks;
  int64_t capacity;
  int unique_per_cycle;  // one-shot names (ids reused once idle names pass kMaxIdleNames)
  double stall_check_seconds = 60;  // small: hits held a few cycles go to the coordinator
};

class NegotiationFuzz : public ::testing::TestWithParam<FuzzParams> {};

TEST_P(NegotiationFuzz, EveryRankExecutesTheSameTensorsInTheSameOrder) {
  const FuzzParams p = GetParam();
  constexpr int kCycles = 300;
  constexpr int kNames = 40;
  ControllerOptions options;
  options.cache_capacity = p.capacity;
  options.fusion_threshold_bytes = 64;  // several fused groups per cycle
  options.stall.check_seconds = p.stall_check_seconds;
  // [rank][cycle] -> description of the executed Responses.
  std::vector<std::vector<std::string>> seen(p.ranks, std::vector<std::string>(kCycles));
  std::vector<std::string> failures(p.ranks);
  testing::RunOnThreadWorld(p.ranks, [&](Communicator& comm) {
    const int r = comm.Rank();
    Controller controller(comm, options);
    TensorQueue queue;
    std::mt19937 rng(1000 + r);
    std::map<std::string, int> submitted;  // name -> submissions so far on this rank
    std::set<std::string> in_flight;
    int next_unique = 0;
    auto params_of = [](const std::string& name, int k, Request* q) {
      // The k-th submission of a name has the same parameters on every rank; they change now
      // and then (stale cache entries).
      const size_t h = std::hash<std::string>()(name);
      const int era = (k + static_cast<int>(h % 7)) / 9;
      // Few distinct parameters, so that a name taking another's id often matches its entry.
      q->shape = {static_cast<int64_t>(1 + (h + era) % 2)};
      q->dtype = (h + era) % 5 == 0 ? DataType::kFloat64 : DataType::kFloat32;
      q->prescale = (h + era) % 7 == 0 ? 0.5 : 1.0;
    };
    auto submit = [&](const std::string& name) {
      if (in_flight.count(name)) return;
      TensorEntry e;
      e.request.name = name;
      e.request.rank = r;
      params_of(name, submitted[name], &e.request);
      e.handle = std::make_shared<Handle>();
      Status s = queue.Add(std::move(e));
      if (!s.ok()) {
        failures[r] += "add " + name + ": " + s.ToString() + "\n";
        return;
      }
      in_flight.insert(name);
    };
    auto submit_group = [&](int g) {
      std::vector<TensorEntry> entries;
      const std::string key = "G" + std::to_string(g) + ".0";
      for (int m = 0; m < 3; ++m) {
        const std::string name = "G" + std::to_string(g) + "." + std::to_string(m);
        if (in_flight.count(name)) return;
      }
      for (int m = 0; m < 3; ++m) {
        TensorEntry e;
        e.request.name = "G" + std::to_string(g) + "." + std::to_string(m);
        e.request.rank = r;
        e.request.group = key;
        e.request.group_size = 3;
        params_of(e.request.name, submitted[e.request.name], &e.request);
        e.handle = std::make_shared<Handle>();
        entries.push_back(std::move(e));
      }
      Status s = queue.AddGroup(std::move(entries));
      if (!s.ok()) {
        failures[r] += "group: " + s.ToString() + "\n";
        return;
      }
      for (int m = 0; m < 3; ++m) in_flight.insert("G" + std::to_string(g) + "." + std::to_string(m));
    };
    std::vector<const Request*> mine;
    std::vector<RequestKey> keys;
    for (int cycle = 0; cycle < kCycles; ++cycle) {
      // Each rank submits a random subset (skewed timing across ranks).
      for (int i = 0; i < kNames; ++i) {
        if (rng() % 3 == 0) submit("t" + std::to_string(i));
      }
      for (int g = 0; g < 2; ++g) {
        if (rng() % 4 == 0) submit_group(g);
      }
      // One-shot names, the same sequence on every rank, at each rank's pace.
      for (int u = 0; u < p.unique_per_cycle; ++u) {
        if (rng() % 2 == 0 || cycle >= kCycles - 20) continue;
        submit("u" + std::to_string(next_unique++));
      }
      queue.TakeNewRequests(&mine, &keys);
      controller.set_name_hits(rng() % 2 == 0);
      auto result = controller.Negotiate(mine, keys, false);
      if (!result.ok()) {
        failures[r] += "negotiate: " + result.status().ToString() + "\n";
        return;
      }
      std::ostringstream out;
      for (const Response& resp : result->responses) {
        out << static_cast<int>(resp.type) << "[";
        for (int64_t c : resp.counts) out << c << ",";
        out << "]";
        const bool by_id = !resp.ids.empty();
        for (size_t i = 0; i < resp.NumTensors(); ++i) {
          TensorEntry e = by_id ? queue.Take(resp.ids[i]) : queue.Take(resp.names[i]);
          if (!e.handle) {
            failures[r] += "cycle " + std::to_string(cycle) + ": response tensor " +
                           std::to_string(i) + " not in flight\n";
            out << "?,";
            continue;
          }
          if (by_id && i < resp.names.size() && resp.names[i] != e.request.name) {
            failures[r] += "cycle " + std::to_string(cycle) + ": id " +
                           std::to_string(resp.ids[i]) + " is '" + e.request.name +
                           "', the name says '" + resp.names[i] + "'\n";
          }
          const std::string name = e.request.name;
          out << name << "#" << submitted[name] << ",";
          ++submitted[name];
          in_flight.erase(name);
          queue.Release(e.request);
        }
        out << ";";
      }
      seen[r][cycle] = out.str();
    }
  });
  for (int r = 0; r < p.ranks; ++r) EXPECT_EQ(failures[r], "") << "rank " << r;
  for (int r = 1; r < p.ranks; ++r) {
    for (int c = 0; c < kCycles; ++c) {
      ASSERT_EQ(seen[r][c], seen[0][c]) << "rank " << r << " cycle " << c;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Params, NegotiationFuzz,
                         ::testing::Values(FuzzParams{2, 8, 0}, FuzzParams{3, 8, 0},
                                           FuzzParams{2, 1024, 0}, FuzzParams{3, 16, 30},
                                           FuzzParams{2, 64, 60}, FuzzParams{3, 256, 80}, FuzzParams{4, 8, 25}, FuzzParams{2, 16, 10, 0.002},
                                           FuzzParams{3, 64, 0, 0.001}),
                         [](const auto& info) {
                           return std::to_string(info.param.ranks) + "ranks_cap" +
                                  std::to_string(info.param.capacity) + "_u" +
                                  std::to_string(info.param.unique_per_cycle) +
                                  (info.param.stall_check_seconds < 1 ? "_stalls" : "");
                         });

}  // namespace
}  // namespace kolo
