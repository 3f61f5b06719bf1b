// base/rank_list.h: how the error messages name a set of ranks, and echo a caller's list.
#include "base/rank_list.h"

#include <gtest/gtest.h>

namespace kolo {
namespace {

TEST(RankList, RunsOfThreeOrMoreCollapseToARange) {
  EXPECT_EQ(RankList({}), "");
  EXPECT_EQ(RankList({0}), "0");
  EXPECT_EQ(RankList({1, 3}), "1,3");
  EXPECT_EQ(RankList({0, 1}), "0,1");        // a run of two stays a list
  EXPECT_EQ(RankList({0, 1, 2, 5}), "0-2,5");
  EXPECT_EQ(RankList({2, 4, 5, 6, 7, 9, 10}), "2,4-7,9,10");
}

TEST(RankList, RanksPhraseTakesTheWordItsCountTakes) {
  EXPECT_EQ(RanksPhrase({3}), "rank 3");
  EXPECT_EQ(RanksPhrase({0, 1}), "ranks 0,1");
  EXPECT_EQ(RanksPhrase({0, 1, 2, 5}), "ranks 0-2,5");
}

TEST(RankList, BracketedRanksEchoTheListAsGiven) {
  EXPECT_EQ(BracketedRanks({}), "[]");
  EXPECT_EQ(BracketedRanks({4}), "[4]");
  EXPECT_EQ(BracketedRanks({3, 0, 0, -1}), "[3,0,0,-1]");  // order, repeats and bad ranks kept
}

}  // namespace
}  // namespace kolo
