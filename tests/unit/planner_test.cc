#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kolo
