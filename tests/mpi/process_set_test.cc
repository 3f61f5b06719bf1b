// Tier 2: process sets through the C API under mpirun (2, 3, 4 ranks): set layout, every
// operation on a set against references over the members' known inputs, a set's operations not
// waiting on ranks outside it, two sets at once under the same tensor name, and the errors:
// lists that differ across ranks, a duplicate set, a non-member submitting, a removed set.
#include <kolo/kolo.h>

#include <gtest/gtest.h>
#include <mpi.h>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <optional>
#include <thread>
#include <vector>

#include "test_util.h"

namespace kolo_test {
namespace {

// Adds a set (collective), failing the test on error.
int AddSet(const std::vector<int>& ranks) {
  int id = -1;
  EXPECT_EQ(kolo_add_process_set(ranks.data(), static_cast<int>(ranks.size()), &id),
            KOLO_SUCCESS) << LastError();
  return id;
}

std::vector<int> EvenRanks() {
  std::vector<int> r;
  for (int i = 0; i < WorldSize(); i += 2) r.push_back(i);
  return r;
}

int Position(const std::vector<int>& ranks, int rank) {
  auto it = std::find(ranks.begin(), ranks.end(), rank);
  return it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
}

// Sum over the set's members of RankUniqueData (float64, exact).
Reference SetSum(const std::vector<int>& members, int64_t count, uint64_t seed) {
  std::vector<TypedBuffer> inputs;
  for (int r : members) inputs.push_back(RankUniqueData(KOLO_FLOAT64, count, r, DataKind::kWide, seed));
  return AllreduceReference(inputs, KOLO_OP_SUM);
}

TEST(ProcessSetTest, LayoutAndAllreduceOfEvenRanks) {
  const std::vector<int> even = EvenRanks();
  const int id = AddSet({even.rbegin(), even.rend()});  // any order; stored ascending
  ASSERT_GT(id, 0);
  EXPECT_EQ(kolo_process_set_size(id), static_cast<int>(even.size()));
  std::vector<int> ranks(even.size());
  ASSERT_EQ(kolo_process_set_ranks(id, ranks.data()), KOLO_SUCCESS);
  EXPECT_EQ(ranks, even);
  const int pos = Position(even, WorldRank());
  EXPECT_EQ(kolo_process_set_rank(id), pos);
  EXPECT_EQ(kolo_process_set_size(0), WorldSize());
  EXPECT_EQ(kolo_process_set_rank(0), WorldRank());

  const int64_t count = 1000;
  TypedBuffer in = RankUniqueData(KOLO_FLOAT64, count, WorldRank(), DataKind::kWide, 7);
  TypedBuffer out(KOLO_FLOAT64, count);
  Handle h;
  const kolo_status_t s =
      kolo_allreduce_async_on(id, TensorName("x").c_str(), in.data(), out.data(), KOLO_FLOAT64,
                              1, &count, KOLO_OP_SUM, 1.0, 1.0, h.out());
  if (pos < 0) {
    EXPECT_EQ(s, KOLO_ERR_INVALID_ARGUMENT);
    EXPECT_NE(LastError().find("is not in process set " + std::to_string(id)),
              std::string::npos) << LastError();
  } else {
    ASSERT_EQ(s, KOLO_SUCCESS) << LastError();
    ASSERT_EQ(WaitHandle(h, "allreduce on the set"), KOLO_SUCCESS)
        << kolo_handle_message(h.get());
    EXPECT_MATCHES_REFERENCE(out.data(), SetSum(even, count, 7));
  }
  WorldBarrier();
  EXPECT_EQ(kolo_remove_process_set(id), KOLO_SUCCESS) << LastError();
  EXPECT_EQ(kolo_process_set_size(id), -1);
}

TEST(ProcessSetTest, OperationsOnASetNeverWaitForOtherRanks) {
  // Every rank but the last: the last one is busy elsewhere (here: asleep) the whole time.
  std::vector<int> most;
  for (int r = 0; r + 1 < WorldSize(); ++r) most.push_back(r);
  const int id = AddSet(most);
  const int pos = Position(most, WorldRank());
  if (pos >= 0) {
    const auto start = std::chrono::steady_clock::now();
    for (int step = 0; step < 20; ++step) {  // repeated: the cache path as well
      const int64_t count = 64;
      TypedBuffer in = RankUniqueData(KOLO_FLOAT64, count, WorldRank(), DataKind::kWide, step);
      TypedBuffer out(KOLO_FLOAT64, count);
      Handle h;
      ASSERT_EQ(kolo_allreduce_async_on(id, TensorName("g").c_str(), in.data(), out.data(),
                                        KOLO_FLOAT64, 1, &count, KOLO_OP_SUM, 1.0, 1.0, h.out()),
                KOLO_SUCCESS) << LastError();
      ASSERT_EQ(WaitHandle(h, "allreduce"), KOLO_SUCCESS) << kolo_handle_message(h.get());
      EXPECT_MATCHES_REFERENCE(out.data(), SetSum(most, count, step));
    }
    EXPECT_EQ(kolo_barrier_on(id), KOLO_SUCCESS) << LastError();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(3));
  }
  WorldBarrier();
  EXPECT_EQ(kolo_remove_process_set(id), KOLO_SUCCESS) << LastError();
}

TEST(ProcessSetTest, EveryOperationOnASet) {
  // The odd ranks (rank 1 alone at 2 and 3 ranks), and everyone else through the global set at
  // the same time, under the same tensor names.
  std::vector<int> odd;
  for (int r = 1; r < WorldSize(); r += 2) odd.push_back(r);
  const std::vector<int> even = EvenRanks();
  const int id = AddSet(odd);
  const int even_id = AddSet(even);  // collective: every rank adds both sets
  const int pos = Position(odd, WorldRank());
  const int n = static_cast<int>(odd.size());
  if (pos >= 0) {
    // broadcast from the set's last member (a rank inside the set)
    const int64_t count = 17;
    TypedBuffer b = RankUniqueData(KOLO_INT32, count, WorldRank(), DataKind::kWide, 1);
    TypedBuffer root_data = RankUniqueData(KOLO_INT32, count, odd.back(), DataKind::kWide, 1);
    Handle hb;
    ASSERT_EQ(kolo_broadcast_async_on(id, "shared", b.data(), b.data(), KOLO_INT32, 1, &count,
                                      n - 1, hb.out()), KOLO_SUCCESS) << LastError();
    ASSERT_EQ(WaitHandle(hb, "broadcast"), KOLO_SUCCESS) << kolo_handle_message(hb.get());
    EXPECT_BUFFERS_EQUAL(b, root_data);

    // allgather: member i contributes i+1 rows of 2
    const int64_t shape[2] = {pos + 1, 2};
    TypedBuffer g(KOLO_FLOAT32, (pos + 1) * 2);
    for (int64_t i = 0; i < g.count; ++i) StoreFloat(KOLO_FLOAT32, g.data(), i, WorldRank() * 100 + i);
    Handle hg;
    ASSERT_EQ(kolo_allgather_async_on(id, "gather", g.data(), KOLO_FLOAT32, 2, shape, hg.out()),
              KOLO_SUCCESS) << LastError();
    ASSERT_EQ(WaitHandle(hg, "allgather"), KOLO_SUCCESS) << kolo_handle_message(hg.get());
    const void* data = nullptr;
    int ndim = 0;
    int64_t out_shape[KOLO_MAX_DIMS];
    ASSERT_EQ(kolo_handle_output(hg.get(), &data, &ndim, out_shape), KOLO_SUCCESS);
    ASSERT_EQ(ndim, 2);
    EXPECT_EQ(out_shape[0], n * (n + 1) / 2);
    int64_t k = 0;
    for (int i = 0; i < n; ++i) {
      for (int64_t j = 0; j < (i + 1) * 2; ++j, ++k) {
        EXPECT_EQ(LoadFloat(KOLO_FLOAT32, data, k), odd[i] * 100 + j) << "row block " << i;
      }
    }
    EXPECT_EQ(kolo_barrier_on(id), KOLO_SUCCESS) << LastError();
  } else {
    // The even ranks use the name "shared" in a set of their own at the same time.
    const int64_t count = 5;
    TypedBuffer b = RankUniqueData(KOLO_FLOAT64, count, WorldRank(), DataKind::kWide, 3);
    Handle h;
    ASSERT_EQ(kolo_allreduce_async_on(even_id, "shared", b.data(), b.data(), KOLO_FLOAT64, 1,
                                      &count, KOLO_OP_SUM, 1.0, 1.0, h.out()), KOLO_SUCCESS)
        << LastError();
    ASSERT_EQ(WaitHandle(h, "allreduce"), KOLO_SUCCESS) << kolo_handle_message(h.get());
    EXPECT_MATCHES_REFERENCE(b.data(), SetSum(even, count, 3));
  }
  WorldBarrier();
  EXPECT_EQ(kolo_remove_process_set(id), KOLO_SUCCESS) << LastError();
  EXPECT_EQ(kolo_remove_process_set(even_id), KOLO_SUCCESS) << LastError();
}

TEST(ProcessSetTest, ListsThatDifferAreAnErrorOnEveryRank) {
  // Rank 0 leaves itself out; the others include every rank.
  std::vector<int> mine;
  for (int r = WorldRank() == 0 ? 1 : 0; r < WorldSize(); ++r) mine.push_back(r);
  int id = -1;
  EXPECT_EQ(kolo_add_process_set(mine.data(), static_cast<int>(mine.size()), &id),
            KOLO_ERR_INVALID_ARGUMENT);
  std::string all = "[0";
  for (int r = 1; r < WorldSize(); ++r) all += "," + std::to_string(r);
  std::string rest = "[1";
  for (int r = 2; r < WorldSize(); ++r) rest += "," + std::to_string(r);
  const std::string others = WorldSize() == 2 ? "rank 1 passed " + all
                             : WorldSize() == 3 ? "ranks 1,2 passed " + all
                                                : "ranks 1-" + std::to_string(WorldSize() - 1) +
                                                      " passed " + all;
  EXPECT_EQ(LastError(), "add_process_set: every rank must pass the same ranks: rank 0 passed " +
                             rest + "], " + others + "]");
  // A rank out of range on one rank only: that rank says why, the others name it.
  std::vector<int> bad = {0};
  if (WorldRank() == 0) bad = {0, WorldSize()};
  EXPECT_EQ(kolo_add_process_set(bad.data(), static_cast<int>(bad.size()), &id),
            KOLO_ERR_INVALID_ARGUMENT);
  if (WorldRank() == 0) {
    EXPECT_NE(LastError().find("outside [0, " + std::to_string(WorldSize()) + ")"),
              std::string::npos) << LastError();
  } else {
    EXPECT_NE(LastError().find("rank 0 passed an invalid list"), std::string::npos) << LastError();
  }
}

TEST(ProcessSetTest, DuplicateRemovedAndUnknownSets) {
  const std::vector<int> one = {0};
  const int id = AddSet(one);
  int again = -1;
  EXPECT_EQ(kolo_add_process_set(one.data(), 1, &again), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("already has ranks [0]"), std::string::npos) << LastError();
  EXPECT_EQ(kolo_remove_process_set(id), KOLO_SUCCESS) << LastError();
  const int64_t count = 1;
  float v = 1;
  Handle h;
  EXPECT_EQ(kolo_allreduce_async_on(id, "gone", &v, &v, KOLO_FLOAT32, 1, &count, KOLO_OP_SUM, 1.0,
                                    1.0, h.out()), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("no process set " + std::to_string(id)), std::string::npos)
      << LastError();
  EXPECT_EQ(kolo_remove_process_set(0), KOLO_ERR_INVALID_ARGUMENT);
  // Ranks removing different sets: every rank fails.
  EXPECT_EQ(kolo_remove_process_set(WorldRank() == 0 ? 12345 : 54321), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("every rank must remove the same process set"), std::string::npos)
      << LastError();
}


// Sets the environment variables of `vars` (name -> value, "" = unset) for the scope, then
// restores the old values.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::vector<std::pair<std::string, std::string>>& vars) {
    for (const auto& [name, value] : vars) {
      const char* old = std::getenv(name.c_str());
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      if (value.empty()) {
        unsetenv(name.c_str());
      } else {
        setenv(name.c_str(), value.c_str(), 1);
      }
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, old] : saved_) {
      if (old) {
        setenv(name.c_str(), old->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// KOLO_TIMELINE and KOLO_AUTOTUNE_LOG name one file each, written by rank 0 of the job. A process
// set's runtime (whose first member opened them again, truncating them under the global
// runtime's writer) must leave them alone: the timeline stays valid JSON with the global
// tensors, the autotune log one CSV with one header and no hole.
TEST(ProcessSetTest, SetsLeaveTheTimelineAndAutotuneLogToTheGlobalSet) {
  int pid = static_cast<int>(getpid());
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  const std::string base = "/tmp/kolo-process-set-test-" + std::to_string(pid);
  const std::string timeline = base + ".json", csv = base + ".csv";
  WorldBarrier();
  ASSERT_EQ(kolo_shutdown(), KOLO_SUCCESS);
  {
    ScopedEnv env({{"KOLO_TIMELINE", timeline},
                   {"KOLO_AUTOTUNE", "1"},
                   {"KOLO_AUTOTUNE_LOG", csv},
                   {"KOLO_AUTOTUNE_WARMUP_SAMPLES", "0"},
                   {"KOLO_AUTOTUNE_STEPS_PER_SAMPLE", "1"}});
    WorldBarrier();
    ASSERT_EQ(kolo_init(), KOLO_SUCCESS) << LastError();
  }
  std::vector<int> all;
  for (int r = 0; r < WorldSize(); ++r) all.push_back(r);
  auto allreduce = [](int set, const std::string& name) {
    const int64_t count = 16;
    TypedBuffer in = RankUniqueData(KOLO_FLOAT32, count, WorldRank(), DataKind::kWide, 5);
    Handle h;
    ASSERT_EQ(kolo_allreduce_async_on(set, name.c_str(), in.data(), in.data(), KOLO_FLOAT32, 1,
                                      &count, KOLO_OP_SUM, 1.0, 1.0, h.out()),
              KOLO_SUCCESS) << LastError();
    ASSERT_EQ(WaitHandle(h, name), KOLO_SUCCESS) << kolo_handle_message(h.get());
  };
  for (int step = 0; step < 4; ++step) allreduce(0, "global.before");
  // Sets whose first member is rank 0 (the global writer's process) and, {1,...}, another.
  const int whole = AddSet(all);
  std::vector<int> rest;
  for (int r = 1; r < WorldSize(); ++r) rest.push_back(r);
  const int tail = AddSet(rest);
  const int pair = WorldSize() > 2 ? AddSet({0, 1}) : -1;
  WorldBarrier();
  // The global tuner logged its first trial (two cycles with all-reduces) before the sets came.
  std::string log_after_add;
  if (WorldRank() == 0) log_after_add = ReadFile(csv);
  for (int step = 0; step < 6; ++step) {
    allreduce(whole, "set.whole");
    if (WorldRank() >= 1) allreduce(tail, "set.tail");
    if (pair > 0 && WorldRank() <= 1) allreduce(pair, "set.pair");
    allreduce(0, "global.after");
  }
  WorldBarrier();
  EXPECT_EQ(kolo_remove_process_set(whole), KOLO_SUCCESS) << LastError();
  EXPECT_EQ(kolo_remove_process_set(tail), KOLO_SUCCESS) << LastError();
  if (pair > 0) {
    EXPECT_EQ(kolo_remove_process_set(pair), KOLO_SUCCESS) << LastError();
  }
  ASSERT_EQ(kolo_shutdown(), KOLO_SUCCESS);  // closes the timeline
  WorldBarrier();
  ASSERT_EQ(kolo_init(), KOLO_SUCCESS) << LastError();
  if (WorldRank() == 0) {
    const std::string text = ReadFile(timeline);
    nlohmann::json events = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(events.is_discarded()) << "the timeline is not valid JSON:\n" << text;
    bool before = false, after = false;
    for (const auto& e : events) {
      if (!e.contains("args") || !e["args"].contains("name")) continue;
      const std::string name = e["args"]["name"].get<std::string>();
      before = before || name == "global.before";
      after = after || name == "global.after";
    }
    EXPECT_TRUE(before && after) << "global tensors missing from the timeline:\n" << text;
    EXPECT_NE(log_after_add.find("\n1,"), std::string::npos)
        << "adding a set lost the autotune log's first trial:\n" << log_after_add;
    const std::string log = ReadFile(csv);
    EXPECT_EQ(log.find('\0'), std::string::npos) << "the autotune log has a hole";
    EXPECT_EQ(log.rfind("trial,", 0), 0u) << log;
    EXPECT_EQ(log.find("trial,", 1), std::string::npos) << "two headers:\n" << log;
    std::remove(timeline.c_str());
    std::remove(csv.c_str());
  }
}

}  // namespace
}  // namespace kolo_test
