// The response cache as pure logic (LRU slots, hit/stale/miss), then the controller's cached
// negotiation over the thread world: every rank must derive the same Responses, a changed
// tensor must invalidate everywhere and be reported as a mismatch, and eviction must not lose a
// tensor that waits for its peers.
#include <gtest/gtest.h>

#include <list>
#include <map>
#include <mutex>
#include <set>

#include "runtime/negotiation/controller.h"
#include "runtime/negotiation/response_cache.h"
#include "runtime/wire/wire.h"
#include "unit/thread_world.h"

namespace kolo {
namespace {

Request Req(const std::string& name, std::vector<int64_t> shape = {4},
            OpType op = OpType::kAllreduce) {
  Request r;
  r.op = op;
  r.name = name;
  r.shape = std::move(shape);
  return r;
}

Response Resp(const std::string& name, int64_t count = 4) {
  Response r;
  r.names = {name};
  r.counts = {count};
  return r;
}

TEST(ResponseCache, HitStaleAndMiss) {
  ResponseCache c(4);
  const int slot = c.Put(Resp("a"), Req("a"));
  int found = -1;
  EXPECT_EQ(c.Find(Req("a"), &found), ResponseCache::Lookup::kHit);
  EXPECT_EQ(found, slot);
  EXPECT_EQ(c.Find(Req("a", {5}), &found), ResponseCache::Lookup::kStale);
  Request scaled = Req("a");
  scaled.prescale = 0.5;
  EXPECT_EQ(c.Find(scaled, &found), ResponseCache::Lookup::kStale);
  EXPECT_EQ(c.Find(Req("a", {4}, OpType::kBroadcast), &found), ResponseCache::Lookup::kStale);
  EXPECT_EQ(c.Find(Req("b"), &found), ResponseCache::Lookup::kMiss);
  EXPECT_EQ(c.name(slot), "a");
}

TEST(ResponseCache, FindsByIdAndNeverTrustsAnIdGivenToAnotherName) {
  ResponseCache c(4);
  Request a = Req("a");
  a.id = 3;
  a.id_serial = 1;
  const int slot_a = c.Put(Resp("a"), a);
  Request b = Req("b");
  b.id = 7;
  b.id_serial = 2;
  const int slot_b = c.Put(Resp("b"), b);
  int found = -1;
  EXPECT_EQ(c.Find(a, &found), ResponseCache::Lookup::kHit);
  EXPECT_EQ(found, slot_a);
  // The queue dropped "a" and gave its id to "b" (whose old id went to "x"), each with a new
  // serial: names decide.
  b.id = 3;
  b.id_serial = 3;
  EXPECT_EQ(c.Find(b, &found), ResponseCache::Lookup::kHit);
  EXPECT_EQ(found, slot_b);
  EXPECT_EQ(c.Find(a, &found), ResponseCache::Lookup::kHit);  // by name now
  EXPECT_EQ(found, slot_a);
  Request x = Req("x");
  x.id = 7;
  x.id_serial = 4;
  EXPECT_EQ(c.Find(x, &found), ResponseCache::Lookup::kMiss);
  // Erasing a slot forgets its id; a Request without one is found by name.
  c.Erase(slot_a);
  EXPECT_EQ(c.Find(a, &found), ResponseCache::Lookup::kMiss);
  EXPECT_EQ(c.Find(Req("b"), &found), ResponseCache::Lookup::kHit);
  EXPECT_EQ(found, slot_b);
}

// A lookup by (id, serial) trusts the pair without reading the name: the queue never gives a
// pair to two names (TensorQueueTest covers that side).
TEST(ResponseCache, AKnownIdAndSerialNeedNoName) {
  ResponseCache c(4);
  Request a = Req("a");
  a.id = 2;
  a.id_serial = 9;
  const int slot = c.Put(Resp("a"), a);
  Request same = Req("not read");
  same.id = 2;
  same.id_serial = 9;
  int found = -1;
  EXPECT_EQ(c.Find(same, &found), ResponseCache::Lookup::kHit);
  EXPECT_EQ(found, slot);
  same.shape = {5};
  EXPECT_EQ(c.Find(same, &found), ResponseCache::Lookup::kStale);
}

// The flat Key against SameParameters: every parameter, shapes of up to and beyond the inline
// dims, splits and groups.
TEST(ResponseCache, TheFlatKeyComparesEveryParameter) {
  std::vector<Request> variants;
  auto add = [&](auto change) {
    Request r = Req("t", {2, 3});
    change(r);
    variants.push_back(r);
  };
  add([](Request&) {});
  add([](Request& r) { r.op = OpType::kBroadcast; });
  add([](Request& r) { r.dtype = DataType::kFloat64; });
  add([](Request& r) { r.reduce_op = ReduceOp::kMax; });
  add([](Request& r) { r.root = 1; });
  add([](Request& r) { r.prescale = 0.5; });
  add([](Request& r) { r.postscale = 2.0; });
  add([](Request& r) { r.device = 0; });
  add([](Request& r) { r.shape = {3, 2}; });
  add([](Request& r) { r.shape = {2, 3, 1}; });
  add([](Request& r) { r.shape = {}; });
  add([](Request& r) { r.shape = {1, 2, 3, 4}; });
  add([](Request& r) { r.shape = {1, 2, 3, 4, 5}; });
  add([](Request& r) { r.shape = {1, 2, 3, 4, 6}; });
  add([](Request& r) { r.splits = {1, 1}; });
  add([](Request& r) { r.splits = {2, 0}; });
  add([](Request& r) {
    r.group = "g";
    r.group_size = 2;
  });
  add([](Request& r) {
    r.group = "h";
    r.group_size = 2;
  });
  for (size_t i = 0; i < variants.size(); ++i) {
    for (size_t j = 0; j < variants.size(); ++j) {
      ResponseCache c(2);
      Request cached = variants[i];
      cached.id = 0;
      cached.id_serial = 1;
      c.Put(Resp("t"), cached);
      for (bool by_id : {true, false}) {
        Request asked = variants[j];
        asked.id = by_id ? 0 : -1;
        asked.id_serial = by_id ? 1 : 0;
        int found;
        EXPECT_EQ(c.Find(asked, &found), i == j ? ResponseCache::Lookup::kHit
                                                : ResponseCache::Lookup::kStale)
            << "cached variant " << i << ", asked variant " << j << (by_id ? " by id" : "");
        EXPECT_EQ(SameParameters(cached, asked), i == j);
      }
    }
  }
}

TEST(ResponseCache, EvictsTheLeastRecentlyUsedAndReusesItsSlot) {
  ResponseCache c(2);
  const int a = c.Put(Resp("a"), Req("a"));
  const int b = c.Put(Resp("b"), Req("b"));
  EXPECT_NE(a, b);
  c.Touch(a);
  const int n = c.Put(Resp("c"), Req("c"));
  EXPECT_EQ(n, b);  // b was least recently used
  int found;
  EXPECT_EQ(c.Find(Req("b"), &found), ResponseCache::Lookup::kMiss);
  EXPECT_EQ(c.Find(Req("a"), &found), ResponseCache::Lookup::kHit);
  EXPECT_EQ(c.size(), 2u);
}

TEST(ResponseCache, PutOfACachedNameReplacesItAndEraseFreesTheSlot) {
  ResponseCache c(3);
  c.Put(Resp("a"), Req("a"));
  const int b = c.Put(Resp("b"), Req("b"));
  c.Put(Resp("a", 8), Req("a", {8}));
  EXPECT_EQ(c.size(), 2u);
  int found;
  EXPECT_EQ(c.Find(Req("a", {8}), &found), ResponseCache::Lookup::kHit);
  EXPECT_EQ(c.response(found).counts, std::vector<int64_t>{8});
  c.Erase(b);
  EXPECT_FALSE(c.occupied(b));
  EXPECT_EQ(c.Find(Req("b"), &found), ResponseCache::Lookup::kMiss);
  EXPECT_EQ(c.Put(Resp("d"), Req("d")), b);  // the lowest free slot
}

// The flat name index and LRU list against a plain model (a map and a list) through a long
// random run of puts, re-puts, touches and erases: lookups, slots, evictions and sizes agree.
TEST(ResponseCache, MatchesAReferenceModelUnderChurn) {
  for (size_t capacity : {1u, 3u, 8u, 37u}) {
    ResponseCache c(capacity);
    std::map<std::string, int> by_name;  // the model
    std::list<int> lru;                  // front = most recent
    std::vector<std::string> name_of(capacity);
    uint64_t x = 12345;
    auto next = [&] { return x = x * 6364136223846793005ull + 1442695040888963407ull; };
    for (int step = 0; step < 20000; ++step) {
      // Names share prefixes and hashes crowd the small index: probe runs wrap and shift.
      const std::string name = "grad/" + std::to_string(next() >> 33 & 63);
      const int action = static_cast<int>(next() >> 60 & 3);
      int slot = -1;
      const auto lookup = c.Find(Req(name), &slot);
      auto it = by_name.find(name);
      ASSERT_EQ(lookup == ResponseCache::Lookup::kHit, it != by_name.end()) << name;
      if (it != by_name.end()) {
        ASSERT_EQ(slot, it->second);
      }
      if (action == 0 && it != by_name.end()) {
        c.Touch(slot);
        lru.remove(slot);
        lru.push_front(slot);
      } else if (action == 1 && it != by_name.end()) {
        c.Erase(slot);
        lru.remove(slot);
        by_name.erase(it);
      } else {
        std::vector<std::pair<int, Request>> erased;
        const int put = c.Put(Resp(name), Req(name), &erased);
        std::vector<int> expected_erased;
        if (it != by_name.end()) {
          expected_erased.push_back(it->second);
          lru.remove(it->second);
          by_name.erase(it);
        }
        if (by_name.size() == capacity) {
          const int victim = lru.back();
          expected_erased.push_back(victim);
          lru.pop_back();
          by_name.erase(name_of[victim]);
        }
        ASSERT_EQ(erased.size(), expected_erased.size());
        for (size_t i = 0; i < erased.size(); ++i) {
          EXPECT_EQ(erased[i].first, expected_erased[i]);
          EXPECT_EQ(erased[i].second.name, name_of[erased[i].first]);
        }
        by_name[name] = put;
        name_of[put] = name;
        lru.push_front(put);
        ASSERT_EQ(c.name(put), name);
      }
      ASSERT_EQ(c.size(), by_name.size()) << "step " << step;
    }
    for (const auto& [name, slot] : by_name) {
      int found = -1;
      EXPECT_EQ(c.Find(Req(name), &found), ResponseCache::Lookup::kHit);
      EXPECT_EQ(found, slot);
    }
  }
}

TEST(ResponseCache, OnlyNegotiatedOperationsAreCacheable) {
  EXPECT_TRUE(ResponseCache::Cacheable(Req("a")));
  EXPECT_TRUE(ResponseCache::Cacheable(Req("g", {2, 3}, OpType::kAllgather)));
  EXPECT_FALSE(ResponseCache::Cacheable(Req("__kolo_barrier.0", {}, OpType::kBarrier)));
  EXPECT_FALSE(ResponseCache::Cacheable(Req("__kolo_join.0", {}, OpType::kJoin)));
  Request refused = Req("a");
  refused.refused = "bad input";
  EXPECT_FALSE(ResponseCache::Cacheable(refused));
}

// One negotiation round per entry of `rounds` on every rank of a thread world; rounds[c][r] is
// what rank r submits in cycle c. Returns every rank's ResponseLists, encoded, per cycle.
struct Outcome {
  std::vector<std::vector<ResponseList>> lists;  // [rank][cycle]
  std::vector<NegotiationStats> stats;           // [rank]
};

Outcome Negotiate(int ranks, const std::vector<std::vector<std::vector<Request>>>& rounds,
            ControllerOptions options) {
  Outcome out;
  out.lists.resize(ranks);
  out.stats.resize(ranks);
  testing::RunOnThreadWorld(ranks, [&](Communicator& comm) {
    Controller controller(comm, options);
    const int r = comm.Rank();
    for (const auto& round : rounds) {
      RequestList mine;
      mine.requests = round[r];
      for (Request& q : mine.requests) q.rank = r;
      auto result = controller.Negotiate(mine);
      ASSERT_TRUE(result.ok()) << result.status().ToString();
      out.lists[r].push_back(*result);
    }
    out.stats[r] = controller.stats();
  });
  return out;
}

std::vector<std::string> Names(const ResponseList& l) {
  std::vector<std::string> names;
  for (const Response& r : l.responses) {
    for (const std::string& n : r.names) names.push_back(n);
  }
  return names;
}

void ExpectSameOnEveryRank(const Outcome& o) {
  for (size_t r = 1; r < o.lists.size(); ++r) {
    ASSERT_EQ(o.lists[r].size(), o.lists[0].size());
    for (size_t c = 0; c < o.lists[0].size(); ++c) {
      EXPECT_EQ(EncodeResponseList(o.lists[r][c]), EncodeResponseList(o.lists[0][c]))
          << "rank " << r << " cycle " << c;
    }
  }
}

ControllerOptions Options(int64_t capacity) {
  ControllerOptions o;
  o.cache_capacity = capacity;
  return o;
}

class CachedController : public ::testing::TestWithParam<int> {};

TEST_P(CachedController, RepeatedStepsAreAgreedWithoutTheCoordinator) {
  const int n = GetParam();
  std::vector<Request> step = {Req("a"), Req("b", {2, 3}), Req("g", {1, 2}, OpType::kAllgather)};
  std::vector<std::vector<std::vector<Request>>> rounds(5, std::vector<std::vector<Request>>(n, step));
  Outcome o = Negotiate(n, rounds, Options(16));
  ExpectSameOnEveryRank(o);
  for (size_t c = 0; c < rounds.size(); ++c) {
    // a and b fused (same dtype and op), then g.
    const ResponseList& l = o.lists[0][c];
    ASSERT_EQ(l.responses.size(), 2u) << "cycle " << c;
    EXPECT_EQ(l.responses[0].names, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(l.responses[0].counts, (std::vector<int64_t>{4, 6}));
    EXPECT_EQ(l.responses[1].type, ResponseType::kAllgather);
    EXPECT_EQ(l.responses[1].first_dims, std::vector<int64_t>(n, 1));
  }
  for (const NegotiationStats& s : o.stats) {
    EXPECT_EQ(s.cycles, 5u);
    EXPECT_EQ(s.slow_cycles, 1u);  // only the first
    EXPECT_EQ(s.cache_misses, 3u);
    EXPECT_EQ(s.cache_hits, 12u);
  }
}

// Requests from a TensorQueue carry ids: fused hits name their tensors by id only (no name
// copied), unless names are asked for (the timeline); the groups are the same either way.
TEST_P(CachedController, FusedHitsCarryIdsAndNamesOnlyWhenAsked) {
  const int n = GetParam();
  testing::RunOnThreadWorld(n, [&](Communicator& comm) {
    Controller controller(comm, Options(16));
    const int r = comm.Rank();
    for (int cycle = 0; cycle < 4; ++cycle) {
      RequestList mine;
      for (int t = 0; t < 3; ++t) {
        Request q = Req("t" + std::to_string(t), {t + 1});
        q.rank = r;
        q.id = 10 * r + t;  // ids are per rank
        q.id_serial = static_cast<uint32_t>(100 + t);
        mine.requests.push_back(q);
      }
      controller.set_name_hits(cycle == 3);
      auto result = controller.Negotiate(mine);
      ASSERT_TRUE(result.ok()) << result.status().ToString();
      ASSERT_EQ(result->responses.size(), 1u) << "cycle " << cycle;
      const Response& fused = result->responses[0];
      EXPECT_EQ(fused.counts, (std::vector<int64_t>{1, 2, 3})) << "cycle " << cycle;
      if (cycle == 0) {  // negotiated by the coordinator: names
        EXPECT_EQ(fused.names, (std::vector<std::string>{"t0", "t1", "t2"}));
        continue;
      }
      EXPECT_EQ(fused.ids, (std::vector<int32_t>{10 * r, 10 * r + 1, 10 * r + 2}))
          << "cycle " << cycle;
      EXPECT_EQ(fused.NumTensors(), 3u);
      if (cycle == 3) {
        EXPECT_EQ(fused.names, (std::vector<std::string>{"t0", "t1", "t2"}));
      } else {
        EXPECT_TRUE(fused.names.empty()) << "cycle " << cycle;
      }
    }
  });
}

TEST_P(CachedController, WithoutACacheEveryCycleGoesToTheCoordinator) {
  const int n = GetParam();
  std::vector<std::vector<std::vector<Request>>> rounds(3, std::vector<std::vector<Request>>(n, {Req("a")}));
  Outcome o = Negotiate(n, rounds, Options(0));
  ExpectSameOnEveryRank(o);
  for (const NegotiationStats& s : o.stats) {
    EXPECT_EQ(s.slow_cycles, 3u);
    EXPECT_EQ(s.cache_hits, 0u);
  }
}

TEST_P(CachedController, AHitWaitsForTheSlowestRank) {
  const int n = GetParam();
  std::vector<std::vector<std::vector<Request>>> rounds = {
      std::vector<std::vector<Request>>(n, {Req("a")}),  // negotiated and cached
      std::vector<std::vector<Request>>(n),              // idle
      std::vector<std::vector<Request>>(n),
      std::vector<std::vector<Request>>(n)};
  for (int r = 0; r < n; ++r) rounds[1 + (r % 2)][r] = {Req("a")};  // odd ranks a cycle late
  Outcome o = Negotiate(n, rounds, Options(16));
  ExpectSameOnEveryRank(o);
  EXPECT_EQ(Names(o.lists[0][0]), std::vector<std::string>{"a"});
  if (n > 1) {
    EXPECT_TRUE(o.lists[0][1].responses.empty());
    EXPECT_EQ(Names(o.lists[0][2]), std::vector<std::string>{"a"});
  }
  EXPECT_EQ(o.stats[0].slow_cycles, 1u);
}

TEST_P(CachedController, AChangedShapeOnOneRankIsAMismatchOnEveryRank) {
  const int n = GetParam();
  std::vector<std::vector<std::vector<Request>>> rounds = {
      std::vector<std::vector<Request>>(n, {Req("a"), Req("b")}),
      std::vector<std::vector<Request>>(n, {Req("a"), Req("b")}),
      std::vector<std::vector<Request>>(n, {Req("a"), Req("b")}),
      std::vector<std::vector<Request>>(n, {Req("a"), Req("b")}),
      std::vector<std::vector<Request>>(n, {Req("a"), Req("b")})};
  rounds[1][n - 1][1] = Req("b", {2, 2});  // the last rank changes b's shape
  rounds[2] = std::vector<std::vector<Request>>(n, {Req("a"), Req("b", {2, 2})});  // all do
  Outcome o = Negotiate(n, rounds, Options(16));
  ExpectSameOnEveryRank(o);
  const ResponseList& bad = o.lists[0][1];
  if (n > 1) {
    ASSERT_EQ(bad.responses.size(), 2u);
    EXPECT_EQ(bad.responses[0].names, std::vector<std::string>{"a"});
    EXPECT_EQ(bad.responses[1].type, ResponseType::kError);
    const std::string others = n == 2   ? "rank 0 has [4]"
                               : n == 3 ? "ranks 0,1 have [4]"
                                        : "ranks 0-" + std::to_string(n - 2) + " have [4]";
    EXPECT_EQ(bad.responses[1].error, "allreduce 'b': shape mismatch: " + others + ", rank " +
                                          std::to_string(n - 1) + " has [2,2]");
  } else {
    EXPECT_EQ(Names(bad), (std::vector<std::string>{"a", "b"}));  // no peer to disagree
  }
  // The new shape is negotiated again (cycle 2 at more than one rank), then cached; the old one
  // is negotiated again in cycle 3 (a changed shape again). A hit does not fuse with a tensor
  // negotiated in the same cycle (fusion/planner.h); in cycle 4 both are hits, fused.
  for (size_t c : {2u, 3u}) {
    int64_t elements = 0;
    for (const Response& r : o.lists[0][c].responses) {
      EXPECT_EQ(r.type, ResponseType::kAllreduce) << "cycle " << c;
      for (int64_t count : r.counts) elements += count;
    }
    EXPECT_EQ(Names(o.lists[0][c]), (std::vector<std::string>{"a", "b"})) << "cycle " << c;
    EXPECT_EQ(elements, 8) << "cycle " << c;
  }
  ASSERT_EQ(o.lists[0][4].responses.size(), 1u);
  EXPECT_EQ(o.lists[0][4].responses[0].counts, (std::vector<int64_t>{4, 4}));
  EXPECT_GE(o.stats[0].invalidations, 1u);
}

TEST_P(CachedController, EvictionNeverLosesAWaitingTensor) {
  const int n = GetParam();
  // Capacity 2 and five names, submitted in rank-dependent order and timing.
  const std::vector<std::string> names = {"t0", "t1", "t2", "t3", "t4"};
  std::vector<std::vector<std::vector<Request>>> rounds(30, std::vector<std::vector<Request>>(n));
  std::multiset<std::string> expected;
  for (int step = 0; step < 4; ++step) {
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < names.size(); ++i) {
        const size_t k = (i * (r + 1) + step) % names.size();
        rounds[step * 6 + (i + r) % 4][r].push_back(Req(names[k]));
      }
    }
    for (const std::string& name : names) expected.insert(name);
  }
  Outcome o = Negotiate(n, rounds, Options(2));
  ExpectSameOnEveryRank(o);
  std::multiset<std::string> seen;
  for (const ResponseList& l : o.lists[0]) {
    for (const Response& r : l.responses) {
      EXPECT_NE(r.type, ResponseType::kError) << r.error;
      for (const std::string& name : r.names) seen.insert(name);
    }
  }
  EXPECT_EQ(seen, expected);
}

INSTANTIATE_TEST_SUITE_P(Ranks, CachedController, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
}  // namespace kolo
