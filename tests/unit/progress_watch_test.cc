// The data plane's stall inspector as pure logic: a wait may go on until the stall shutdown
// time, then fails with what it waited for; never when the check is off or no shutdown time is
// set. (The whole path, a SIGSTOPped rank under mpirun, is the fault test "freeze".)
#include <gtest/gtest.h>

#include "runtime/progress_watch.h"

namespace kolo {
namespace {

using Clock = ProgressWatch::Clock;
using std::chrono::milliseconds;

StallOptions Options(double check, double shutdown, bool enabled = true) {
  StallOptions o;
  o.enabled = enabled;
  o.check_seconds = check;
  o.shutdown_seconds = shutdown;
  return o;
}

TEST(ProgressWatch, AWaitFailsAfterTheShutdownTimeNamingWhatItWaitedFor) {
  ProgressWatch watch(Options(1, 3), 2);
  Response big;
  big.type = ResponseType::kAllreduce;
  big.names = {"big"};
  watch.Begin(&big);
  watch.set_algorithm("ring");
  const auto since = Clock::now();
  EXPECT_TRUE(watch.Check(since, "rank 1 (receive, tag 3)", since + milliseconds(500)).ok());
  EXPECT_TRUE(watch.Check(since, "rank 1 (receive, tag 3)", since + milliseconds(1500)).ok());
  EXPECT_TRUE(watch.failure().ok());
  Status s = watch.Check(since, "rank 1 (receive, tag 3)", since + milliseconds(3100));
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s.message().rfind("allreduce 'big' (ring) on rank 2: no progress for 3.1 s waiting "
                              "for rank 1 (receive, tag 3); stalled for over 3 s "
                              "(KOLO_STALL_SHUTDOWN_TIME_SECONDS=3)", 0), 0u) << s.message();
  EXPECT_EQ(watch.failure().message(), s.message());
}

TEST(ProgressWatch, WithoutAShutdownTimeAWaitOnlyWarns) {
  ProgressWatch watch(Options(1, 0), 0);
  const auto since = Clock::now();
  EXPECT_TRUE(watch.Check(since, "rank 1", since + std::chrono::hours(1)).ok());
  EXPECT_TRUE(watch.failure().ok());
}

TEST(ProgressWatch, OffWhenTheStallCheckIsDisabled) {
  ProgressWatch watch(Options(1, 2, /*enabled=*/false), 0);
  const auto since = Clock::now();
  EXPECT_TRUE(watch.Check(since, "rank 1", since + std::chrono::seconds(10)).ok());
  EXPECT_TRUE(watch.failure().ok());
}

}  // namespace
}  // namespace kolo
