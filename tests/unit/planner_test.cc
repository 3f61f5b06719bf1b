#include <gtest/gtest.h>

#include <limits>

#include "fusion/planner.h"

namespace kolo {
namespace {

Response AR(const std::string& name, int64_t count, DataType t = DataType::kFloat32,
            ReduceOp op = ReduceOp::kSum) {
  Response r;
  r.type = ResponseType::kAllreduce;
  r.names = {name};
  r.counts = {count};
  r.dtype = t;
  r.reduce_op = op;
  return r;
}

std::vector<std::vector<std::string>> Names(const std::vector<Response>& rs) {
  std::vector<std::vector<std::string>> out;
  for (const auto& r : rs) out.push_back(r.names);
  return out;
}

TEST(Planner, FusesCompatibleUpToThreshold) {
  // 100 floats = 400 bytes each; threshold 1000 bytes -> groups of two.
  auto out = FuseResponses({AR("a", 100), AR("b", 100), AR("c", 100)}, 1000, 1 << 20);
  EXPECT_EQ(Names(out), (std::vector<std::vector<std::string>>{{"a", "b"}, {"c"}}));
  EXPECT_EQ(out[0].counts, (std::vector<int64_t>{100, 100}));
}

TEST(Planner, IncompatibleGroupsStaySeparateAndKeepFirstMemberOrder) {
  Response g;
  g.type = ResponseType::kAllgather;
  g.names = {"gather"};
  auto out = FuseResponses({AR("a", 1), AR("i", 1, DataType::kInt32), g, AR("b", 1),
                            AR("m", 1, DataType::kFloat32, ReduceOp::kMax), AR("j", 1, DataType::kInt32)},
                           1 << 20, 1 << 20);
  EXPECT_EQ(Names(out), (std::vector<std::vector<std::string>>{
                            {"a", "b"}, {"i", "j"}, {"gather"}, {"m"}}));
}

TEST(Planner, LargeTensorsGoAloneAndZeroThresholdDisablesFusion) {
  auto out = FuseResponses({AR("s1", 10), AR("big", 1 << 20), AR("s2", 10)}, 1 << 30, 4096);
  EXPECT_EQ(Names(out), (std::vector<std::vector<std::string>>{{"s1", "s2"}, {"big"}}));
  out = FuseResponses({AR("a", 1), AR("b", 1)}, 0, 4096);
  EXPECT_EQ(Names(out), (std::vector<std::vector<std::string>>{{"a"}, {"b"}}));
}

// Where a fused group of host tensors costs no copies (the runtime's set_host_direct_bytes:
// shm reduces it in the tensors' own buffers), host tensors of any size fuse up to the
// threshold, negotiated or cache hits alike; device tensors keep the direct size, and a tensor
// over the threshold still goes alone.
TEST(Planner, HostDirectSizeAppliesToHostTensorsOnly) {
  Response device_big = AR("dbig", 1 << 20), device_small = AR("ds", 10);
  device_big.device = device_small.device = 0;
  // Adasum packs its groups whole (FusionExecutor::RunAdasum): it keeps the direct size.
  const Response adasum_big = AR("abig", 1 << 20, DataType::kFloat32, ReduceOp::kAdasum);
  const Response adasum_small = AR("as", 10, DataType::kFloat32, ReduceOp::kAdasum);
  const std::vector<Response> in = {AR("s1", 10),        AR("big", 1 << 20), device_big,
                                    AR("s2", 10),        device_small,       AR("huge", 1 << 22),
                                    AR("big2", 1 << 20), adasum_big,         adasum_small};
  const std::vector<std::vector<std::string>> want = {
      {"s1", "big", "s2"}, {"dbig"}, {"ds"}, {"huge"}, {"big2"}, {"abig"}, {"as"}};
  const int64_t threshold = 8 << 20;  // s1, big and s2 fit; big2 would pass it
  ResponseFuser added(threshold, 4096, in.size());
  added.set_host_direct_bytes(std::numeric_limits<int64_t>::max());
  for (const Response& r : in) added.Add(r);
  EXPECT_EQ(Names(added.Take()), want);

  std::vector<FusionKey> keys;
  std::vector<int32_t> ids;
  std::vector<int> slots;
  for (size_t i = 0; i < in.size(); ++i) {
    keys.push_back(FusionKey::Of(in[i]));
    ids.push_back(static_cast<int32_t>(i));
    slots.push_back(static_cast<int>(i));
  }
  ResponseFuser hits(threshold, 4096, in.size());
  hits.set_host_direct_bytes(std::numeric_limits<int64_t>::max());
  hits.AddHits(
      slots, keys.data(), ids.data(), true, [&](int slot) -> const Response& { return in[slot]; },
      [&](int slot) -> const std::string& { return in[slot].names[0]; });
  EXPECT_EQ(Names(hits.Take()), want);

  // Without it, the direct size holds for host tensors too.
  EXPECT_EQ(Names(FuseResponses(in, threshold, 4096)),
            (std::vector<std::vector<std::string>>{
                {"s1", "s2"}, {"big"}, {"dbig"}, {"ds"}, {"huge"}, {"big2"}, {"abig"}, {"as"}}));
}

TEST(Planner, ScaleFactorsMustMatchToFuse) {
  Response a = AR("a", 1), b = AR("b", 1);
  b.prescale = 2;
  EXPECT_EQ(FuseResponses({a, b}, 1 << 20, 1 << 20).size(), 2u);
}

TEST(Planner, FuserFromReferencesMatchesFuseResponsesAndLeavesItsInputAlone) {
  Response g;
  g.type = ResponseType::kAllgather;
  g.names = {"gather"};
  const std::vector<Response> in = {AR("a", 100), AR("i", 1, DataType::kInt32), g,
                                    AR("b", 100), AR("big", 1 << 20), AR("c", 100),
                                    AR("j", 1, DataType::kInt32)};
  ResponseFuser fuser(1000, 4096, in.size());
  for (const Response& r : in) fuser.Add(r);
  const std::vector<Response> out = fuser.Take();
  EXPECT_EQ(Names(out), Names(FuseResponses(in, 1000, 4096)));
  EXPECT_EQ(Names(out), (std::vector<std::vector<std::string>>{
                            {"a", "b"}, {"i", "j"}, {"gather"}, {"big"}, {"c"}}));
  EXPECT_EQ(out[1].counts, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(in[0].names, std::vector<std::string>{"a"});  // copied, not moved
  EXPECT_TRUE(fuser.Take().empty());                      // a fuser starts over after Take
}

TEST(Planner, FusedGroupKeepsIdsOnlyWhileEveryMemberHasOne) {
  ResponseFuser fuser(1000, 4096, 4);
  fuser.Add(AR("a", 1), 5);
  fuser.Add(AR("b", 1), 2);
  fuser.Add(AR("i", 1, DataType::kInt32), 9);
  fuser.Add(AR("j", 1, DataType::kInt32));  // no id: the int32 group loses its ids
  fuser.Add(AR("k", 1, DataType::kInt32), 4);
  const std::vector<Response> out = fuser.Take();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].ids, (std::vector<int32_t>{5, 2}));
  EXPECT_TRUE(out[1].ids.empty());
  EXPECT_EQ(out[1].names, (std::vector<std::string>{"i", "j", "k"}));
}

// Cache hits fused in bulk (AddHits), as the controller does, against the reference rules
// (FuseResponses) on the same Responses: the same groups, counts and order, whatever the mix
// of dtypes, ops, scales, sizes and thresholds; ids for every tensor; names only when asked.
TEST(Planner, HitsInBulkFuseAsTheRulesSay) {
  std::vector<Response> hits;
  for (int i = 0; i < 60; ++i) {
    Response r = AR("t" + std::to_string(i), 1 + (i * 37) % 300,
                    i % 7 == 3 ? DataType::kInt32 : DataType::kFloat32,
                    i % 11 == 5 ? ReduceOp::kMax : ReduceOp::kSum);
    if (i % 13 == 4) r.prescale = 0.5;
    if (i % 17 == 8) r.counts = {100000};  // past direct_bytes: alone
    if (i % 19 == 9) {
      r.type = ResponseType::kBroadcast;
      r.counts.clear();
    }
    hits.push_back(r);
  }
  std::vector<FusionKey> keys;
  std::vector<int32_t> ids;
  std::vector<int> slots;
  for (size_t i = 0; i < hits.size(); ++i) {
    keys.push_back(FusionKey::Of(hits[i]));
    ids.push_back(static_cast<int32_t>(1000 + i));
    slots.push_back(static_cast<int>(i));
  }
  auto response_of = [&](int slot) -> const Response& { return hits[slot]; };
  auto name_of = [&](int slot) -> const std::string& { return hits[slot].names[0]; };
  for (int64_t threshold : {0, 400, 1000, 5000, 1 << 20}) {
    const std::vector<Response> expected = FuseResponses(hits, threshold, 4096);
    for (bool with_names : {true, false}) {
      ResponseFuser fuser(threshold, 4096, hits.size());
      fuser.AddHits(slots, keys.data(), ids.data(), with_names, response_of, name_of);
      const std::vector<Response> out = fuser.Take();
      ASSERT_EQ(out.size(), expected.size()) << "threshold " << threshold;
      for (size_t g = 0; g < out.size(); ++g) {
        SCOPED_TRACE("threshold " + std::to_string(threshold) + " group " + std::to_string(g));
        EXPECT_EQ(out[g].type, expected[g].type);
        EXPECT_EQ(out[g].dtype, expected[g].dtype);
        EXPECT_EQ(out[g].reduce_op, expected[g].reduce_op);
        EXPECT_EQ(out[g].prescale, expected[g].prescale);
        EXPECT_EQ(out[g].counts, expected[g].counts);
        std::vector<int32_t> expected_ids;
        for (const std::string& name : expected[g].names) {
          expected_ids.push_back(1000 + std::stoi(name.substr(1)));
        }
        EXPECT_EQ(out[g].ids, expected_ids);
        EXPECT_EQ(out[g].NumTensors(), expected[g].names.size());
        if (with_names) {
          EXPECT_EQ(out[g].names, expected[g].names);
        } else {
          // A hit that cannot fuse keeps its cached Response, name included.
          EXPECT_TRUE(out[g].names.empty() || out[g].names == expected[g].names);
        }
      }
    }
  }
}

TEST(Planner, HitsAndNegotiatedResponsesNeverShareAGroup) {
  Response hit = AR("hit", 1);
  const FusionKey key = FusionKey::Of(hit);
  ResponseFuser fuser(1 << 20, 4096, 3);
  fuser.AddHit(hit, key, 7, nullptr);
  fuser.Add(AR("new", 1));
  fuser.AddHit(AR("hit2", 1), key, 8, nullptr);
  const std::vector<Response> out = fuser.Take();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].ids, (std::vector<int32_t>{7, 8}));
  EXPECT_TRUE(out[0].names.empty());
  EXPECT_EQ(out[0].counts, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(out[1].names, std::vector<std::string>{"new"});
  EXPECT_TRUE(out[1].ids.empty());
}

TEST(Planner, AHitWithoutAnIdDropsTheGroupsIdsAndNamesCarryIt) {
  const Response a = AR("a", 1), b = AR("b", 1);
  const std::string na = "a", nb = "b";
  ResponseFuser fuser(1 << 20, 4096, 2);
  fuser.AddHit(a, FusionKey::Of(a), 3, &na);
  fuser.AddHit(b, FusionKey::Of(b), -1, &nb);
  const std::vector<Response> out = fuser.Take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].ids.empty());
  EXPECT_EQ(out[0].names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(out[0].NumTensors(), 2u);
}

}  // namespace
}  // namespace kolo
