// HandoverWatch (collectives/host/handover_watch.h): who probes whom at which probing barrier,
// and the verdict: the first probe with a peer decides; after it a peer turns slow (and the
// rank streams) only after two slow probes in a row, and fast again only after two fast ones;
// failed probes change nothing; fixed modes never probe; KOLO_SHM_STORES's words.
#include "collectives/host/handover_watch.h"

#include <gtest/gtest.h>

namespace kolo {
namespace {

constexpr int64_t kFastCrossingNs = 50;
constexpr int64_t kSlowCrossingNs = 200;
static_assert(kFastCrossingNs < HandoverWatch::kSlowHandoverNs &&
              kSlowCrossingNs > HandoverWatch::kSlowHandoverNs);

TEST(HandoverWatchTest, RankZeroProbesEachPeerInTurnAndThePeerProbesRankZero) {
  const HandoverWatch watch(4);
  const uint64_t every = HandoverWatch::kProbeEvery;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(watch.ProbePeer(rank, 2), -1) << "not a probing barrier";
    EXPECT_EQ(watch.ProbePeer(rank, every), -1) << "not a probing barrier";
  }
  // Probing barriers 1, every + 1, 2 every + 1, 3 every + 1: partners 1, 2, 3, 1.
  const int partners[] = {1, 2, 3, 1};
  for (int k = 0; k < 4; ++k) {
    const uint64_t barrier = every * static_cast<uint64_t>(k) + 1;
    EXPECT_EQ(watch.ProbePeer(0, barrier), partners[k]);
    for (int rank = 1; rank < 4; ++rank) {
      EXPECT_EQ(watch.ProbePeer(rank, barrier), rank == partners[k] ? 0 : -1)
          << "rank " << rank << " barrier " << barrier;
    }
  }
  EXPECT_EQ(HandoverWatch(1).ProbePeer(0, 1), -1) << "a rank alone probes nobody";
  EXPECT_EQ(HandoverWatch(2).ProbePeer(1, 1), 0);
}

TEST(HandoverWatchTest, TheFirstProbeDecidesThenTwoInARow) {
  HandoverWatch watch(2);
  EXPECT_FALSE(watch.streaming()) << "plain until a probe says otherwise";
  watch.Add(1, -1);  // a probe that timed out says nothing
  EXPECT_FALSE(watch.streaming());
  watch.Add(1, kSlowCrossingNs);
  EXPECT_TRUE(watch.streaming()) << "the first measured probe decides alone";
  watch.Add(1, kFastCrossingNs);
  EXPECT_TRUE(watch.streaming()) << "after it, one fast probe is not enough";
  watch.Add(1, kSlowCrossingNs);
  watch.Add(1, kFastCrossingNs);
  EXPECT_TRUE(watch.streaming()) << "fast, slow, fast: never two in a row";
  watch.Add(1, -1);  // ... and breaks no run
  watch.Add(1, kFastCrossingNs);
  EXPECT_FALSE(watch.streaming());
  watch.Add(1, kSlowCrossingNs);
  EXPECT_FALSE(watch.streaming());
  watch.Add(1, kSlowCrossingNs);
  EXPECT_TRUE(watch.streaming());

  HandoverWatch fast_first(2);
  fast_first.Add(1, kFastCrossingNs);
  fast_first.Add(1, kSlowCrossingNs);
  EXPECT_FALSE(fast_first.streaming());
}

TEST(HandoverWatchTest, AnySlowPeerStreams) {
  HandoverWatch watch(3);
  watch.Add(1, kFastCrossingNs);
  watch.Add(2, kSlowCrossingNs);
  EXPECT_TRUE(watch.streaming());
  watch.Add(2, kFastCrossingNs);
  watch.Add(2, kFastCrossingNs);
  EXPECT_FALSE(watch.streaming());
  watch.Add(7, kSlowCrossingNs);  // no such peer
  EXPECT_FALSE(watch.streaming());
}

TEST(HandoverWatchTest, FixedModesNeitherProbeNorChange) {
  HandoverWatch plain(2, HandoverWatch::Mode::kPlain);
  HandoverWatch streamed(2, HandoverWatch::Mode::kStreamed);
  EXPECT_EQ(plain.ProbePeer(0, 1), -1);
  EXPECT_EQ(streamed.ProbePeer(0, 1), -1);
  for (int i = 0; i < 3; ++i) {
    plain.Add(1, kSlowCrossingNs);
    streamed.Add(1, kFastCrossingNs);
  }
  EXPECT_FALSE(plain.streaming());
  EXPECT_TRUE(streamed.streaming());
}

TEST(HandoverWatchTest, ShmStoresWords) {
  HandoverWatch::Mode mode = HandoverWatch::Mode::kPlain;
  EXPECT_TRUE(ParseShmStores("auto", &mode));
  EXPECT_EQ(mode, HandoverWatch::Mode::kAuto);
  EXPECT_TRUE(ParseShmStores("plain", &mode));
  EXPECT_EQ(mode, HandoverWatch::Mode::kPlain);
  EXPECT_TRUE(ParseShmStores("streamed", &mode));
  EXPECT_EQ(mode, HandoverWatch::Mode::kStreamed);
  EXPECT_FALSE(ParseShmStores("Streamed", &mode));
  EXPECT_FALSE(ParseShmStores("", &mode));
  EXPECT_EQ(mode, HandoverWatch::Mode::kStreamed) << "a refused word leaves the mode alone";
}

}  // namespace
}  // namespace kolo
