// Ready marks of cache hits (controller.h): HitMarks as pure bit logic, then the controller over
// the thread world, with every control-plane call counted: with no observer a cycle of hits is
// one AND and nothing else; with one on rank 0, every rank gathers its hits in the same cycles
// and rank 0 is told of each rank's hit once, in the cycle the rank submitted it.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "runtime/negotiation/controller.h"
#include "runtime/negotiation/hit_marks.h"
#include "unit/thread_world.h"

namespace kolo {
namespace {

using Mark = std::pair<int, int>;  // slot, rank

std::vector<Mark> Update(HitMarks& m, const std::vector<uint64_t>& held, int ranks) {
  std::vector<Mark> marks;
  m.Update(held.data(), ranks, held.size() / ranks,
           [&](int slot, int rank) { marks.emplace_back(slot, rank); });
  return marks;
}

TEST(HitMarks, MarksABitOnceUntilItsSlotRuns) {
  HitMarks m;
  // Two ranks, two words each (slots 0..127).
  EXPECT_EQ(Update(m, {0b101, 0, 0, uint64_t{1} << 3}, 2),
            (std::vector<Mark>{{0, 0}, {2, 0}, {67, 1}}));
  // Still held, and rank 1 now holds slot 0 too: only that is new.
  EXPECT_EQ(Update(m, {0b101, 0, 0b1, uint64_t{1} << 3}, 2), (std::vector<Mark>{{0, 1}}));
  // Slot 0 ran; rank 0 submits it again at once (its bit never looked cleared): a new step.
  m.Forget(0, 0b1);
  EXPECT_EQ(Update(m, {0b101, 0, 0, uint64_t{1} << 3}, 2), (std::vector<Mark>{{0, 0}}));
  // Slot 67's entry erased, and the slot at once holds a hit of another name.
  m.Forget(67);
  EXPECT_EQ(Update(m, {0b101, 0, 0, uint64_t{1} << 3}, 2), (std::vector<Mark>{{67, 1}}));
  // A cycle without a gather forgets everything.
  m.Clear();
  EXPECT_FALSE(m.active());
  EXPECT_EQ(Update(m, {0b100, 0, 0, 0}, 2), (std::vector<Mark>{{2, 0}}));
}

// Counts the control plane's calls of one rank, passing them on.
class CountingCommunicator : public Communicator {
 public:
  explicit CountingCommunicator(Communicator& inner) : inner_(inner) {}
  int Rank() const override { return inner_.Rank(); }
  int Size() const override { return inner_.Size(); }
  std::string_view BackendName() const override { return inner_.BackendName(); }
  Status GatherBytes(const std::string& mine, std::vector<std::string>* all, int root) override {
    calls.push_back("GatherBytes");
    return inner_.GatherBytes(mine, all, root);
  }
  Status BroadcastBytes(std::string* bytes, int root) override {
    calls.push_back("BroadcastBytes");
    return inner_.BroadcastBytes(bytes, root);
  }
  Status AndBits(uint64_t* words, size_t count) override {
    calls.push_back("AndBits");
    return inner_.AndBits(words, count);
  }
  Status GatherWords(const uint64_t* mine, size_t count, uint64_t* all, int root) override {
    calls.push_back("GatherWords");
    return inner_.GatherWords(mine, count, all, root);
  }
  std::vector<std::string> calls;

 private:
  Communicator& inner_;
};

struct Seen {
  int cycle;
  std::string name;
  int rank;
  bool operator<(const Seen& o) const {
    return std::tie(cycle, name, rank) < std::tie(o.cycle, o.name, o.rank);
  }
  bool operator==(const Seen& o) const {
    return std::tie(cycle, name, rank) == std::tie(o.cycle, o.name, o.rank);
  }
};

class RecordingObserver : public RequestObserver {
 public:
  void RequestArrived(const Request& request, int rank) override {
    seen.insert(Seen{cycle, request.name, rank});
    ++count;
  }
  int cycle = 0;
  std::multiset<Seen> seen;
  int count = 0;
};

Request Req(const std::string& name, int rank) {
  Request r;
  r.op = OpType::kAllreduce;
  r.name = name;
  r.shape = {4};
  r.rank = rank;
  return r;
}

// The schedule: cycle 0 every rank submits a and b (negotiated, then cached); cycle 1 every
// rank but rank 1 submits them again (hits that wait); cycles 2 and 3 nothing; cycle 4 rank 1
// submits (the hits run); cycle 5 every rank (hits that run at once); cycle 6 nothing.
constexpr int kCycles = 7;
int SubmitCycle(int step, int rank) {
  if (step == 0) return 0;
  if (step == 1) return rank == 1 ? 4 : 1;
  return 5;
}

struct Schedule {
  std::vector<std::vector<std::vector<std::string>>> calls;  // [rank][cycle]
  std::vector<std::vector<std::vector<std::string>>> names;  // [rank][cycle]: what ran
  std::multiset<Seen> seen;                                  // rank 0's observer
  int observed = 0;
};

Schedule RunSchedule(int n, bool observe) {
  Schedule run;
  run.calls.assign(n, std::vector<std::vector<std::string>>(kCycles));
  run.names.assign(n, std::vector<std::vector<std::string>>(kCycles));
  std::mutex mu;
  testing::RunOnThreadWorld(n, [&](Communicator& comm) {
    CountingCommunicator counted(comm);
    ControllerOptions options;
    options.cache_capacity = 16;
    Controller controller(counted, options);
    RecordingObserver observer;
    // As the Runtime does: only rank 0 records a timeline.
    ScopedRequestObserver scope(observe && comm.Rank() == 0 ? &observer : nullptr);
    const int r = comm.Rank();
    for (int cycle = 0; cycle < kCycles; ++cycle) {
      observer.cycle = cycle;
      RequestList mine;
      for (int step = 0; step < 3; ++step) {
        if (SubmitCycle(step, r) != cycle) continue;
        mine.requests.push_back(Req("a", r));
        mine.requests.push_back(Req("b", r));
      }
      counted.calls.clear();
      auto result = controller.Negotiate(mine);
      ASSERT_TRUE(result.ok()) << result.status().ToString();
      std::lock_guard<std::mutex> lock(mu);
      run.calls[r][cycle] = counted.calls;
      for (const Response& resp : result->responses) {
        for (const std::string& name : resp.names) run.names[r][cycle].push_back(name);
      }
    }
    if (r == 0) {
      run.seen = observer.seen;
      run.observed = observer.count;
    }
  });
  return run;
}

class HitMarksInController : public ::testing::TestWithParam<int> {};

TEST_P(HitMarksInController, WithoutAnObserverACycleOfHitsIsOneAnd) {
  const int n = GetParam();
  Schedule run = RunSchedule(n, /*observe=*/false);
  const std::vector<std::string> slow = {"AndBits", "GatherBytes", "BroadcastBytes"};
  const std::vector<std::string> cached = {"AndBits"};
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(run.calls[r][0], slow) << "rank " << r;
    for (int cycle = 1; cycle < kCycles; ++cycle) {
      EXPECT_EQ(run.calls[r][cycle], cached) << "rank " << r << " cycle " << cycle;
    }
    // The hits were served from the cache: the steps ran when their last rank submitted.
    EXPECT_EQ(run.names[r][4], (std::vector<std::string>{"a", "b"})) << "rank " << r;
    EXPECT_EQ(run.names[r][5], (std::vector<std::string>{"a", "b"})) << "rank " << r;
  }
}

TEST_P(HitMarksInController, RankZeroSeesEachHitOnceInItsFirstCycle) {
  const int n = GetParam();
  Schedule run = RunSchedule(n, /*observe=*/true);
  // The reference, from the schedule alone: each rank's Request of each step, seen in the
  // cycle it was submitted (step 0 by the coordinator, the others as hits).
  std::multiset<Seen> expected;
  for (int step = 0; step < 3; ++step) {
    for (int r = 0; r < n; ++r) {
      for (const char* name : {"a", "b"}) expected.insert(Seen{SubmitCycle(step, r), name, r});
    }
  }
  EXPECT_EQ(run.seen, expected);
  EXPECT_EQ(run.observed, 6 * n);  // nothing twice while a hit waited (cycles 2, 3)
  // Every rank took part in the same calls: the gather only where some rank held a hit.
  const std::vector<std::string> slow = {"AndBits", "GatherBytes", "BroadcastBytes"};
  const std::vector<std::string> gathered = {"AndBits", "GatherWords"};
  const std::vector<std::string> cached = {"AndBits"};
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(run.calls[r][0], slow) << "rank " << r;
    for (int cycle : {1, 2, 3, 4, 5}) {
      EXPECT_EQ(run.calls[r][cycle], gathered) << "rank " << r << " cycle " << cycle;
    }
    EXPECT_EQ(run.calls[r][6], cached) << "rank " << r << ": nobody held a hit";
    EXPECT_EQ(run.names[r][4], (std::vector<std::string>{"a", "b"})) << "rank " << r;
    EXPECT_EQ(run.names[r][5], (std::vector<std::string>{"a", "b"})) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, HitMarksInController, ::testing::Values(2, 3),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
}  // namespace kolo
