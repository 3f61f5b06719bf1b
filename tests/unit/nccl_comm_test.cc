// NCCL communicators and kolo's streams (collectives/nccl/nccl_comm.h), without a GPU: the
// communicator table, its set-up and its waits run against a fake NCCL (SetNcclForTesting)
// whose calls stay "in progress" for as long as a test says, so the bounds that keep a first
// GPU run from hanging are checked on every machine: set-up and first connection end at the
// set-up timeout or when a peer is gone, an abort from another thread ends a wait in progress,
// and an aborted communicator is not made again by one rank alone. Also which stream order a
// communicator joins (one per process set, shared by its node communicators).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "collectives/node_context.h"
#include "kolo/config.h"
#include "tests/unit/thread_world.h"

#if KOLO_WITH_NCCL
#include "collectives/nccl/nccl_comm.h"
#include "collectives/nccl/nccl_lib.h"
#endif

namespace kolo {
namespace {

using testing::RunOnThreadWorld;
using Clock = std::chrono::steady_clock;

// Two process sets never share a stream order; a process set's node-local and cross-node
// communicators join their set's, so its hierarchical steps stay in one order.
TEST(WorkOrder, EachCommunicatorHasItsOwnAndItsNodeCommunicatorsJoinIt) {
  auto world = std::make_shared<LoopbackWorld>(1, std::chrono::seconds(10));
  LoopbackCommunicator a(world, 0), b(world, 0);
  EXPECT_NE(a.order_serial(), b.order_serial());
  EXPECT_EQ(a.order_serial(), a.serial());
  RunOnThreadWorld(4, "2x2", [&](Communicator& comm) {
    ASSERT_NE(comm.node(), nullptr);
    ASSERT_TRUE(comm.node()->local && comm.node()->cross);
    EXPECT_EQ(comm.node()->local->order_serial(), comm.order_serial());
    EXPECT_EQ(comm.node()->cross->order_serial(), comm.order_serial());
    EXPECT_NE(comm.node()->local->serial(), comm.serial());
    EXPECT_NE(comm.order_serial(), a.order_serial());
  });
}

#if KOLO_WITH_NCCL

// The fake library: every communicator it makes reports `state` from ncclCommGetAsyncError, so
// a test holds a call "in progress" as long as it likes, or ends it with an error.
struct FakeComm {
  std::atomic<int> state{ncclInProgress};
  std::atomic<bool> aborted{false};
};
struct Fake {
  std::atomic<int> inits{0};
  std::atomic<int> aborts{0};
  std::atomic<int> nonblocking_inits{0};
  std::atomic<int> state_after_init{ncclSuccess};  // what a new communicator settles to
  std::atomic<int> polls_to_settle{3};             // polls before it does (-1: never)
  FakeComm comms[16];
  std::atomic<int> next{0};
} g_fake;
std::atomic<int> g_polls_left[16];

FakeComm* Of(ncclComm_t c) { return reinterpret_cast<FakeComm*>(c); }
int IndexOf(ncclComm_t c) { return static_cast<int>(Of(c) - g_fake.comms); }

ncclResult_t FakeGetUniqueId(ncclUniqueId* id) {
  std::memset(id, 'k', sizeof(*id));
  return ncclSuccess;
}
ncclResult_t FakeInit(ncclComm_t* comm, int, ncclUniqueId, int, ncclConfig_t* config) {
  const int i = g_fake.next.fetch_add(1);
  FakeComm& c = g_fake.comms[i];
  c.state = ncclInProgress;
  c.aborted = false;
  g_polls_left[i] = g_fake.polls_to_settle.load();
  g_fake.inits.fetch_add(1);
  if (config != nullptr && config->blocking == 0) g_fake.nonblocking_inits.fetch_add(1);
  *comm = reinterpret_cast<ncclComm_t>(&c);
  return ncclInProgress;
}
ncclResult_t FakeGetAsyncError(ncclComm_t comm, ncclResult_t* state) {
  FakeComm& c = *Of(comm);
  std::atomic<int>& left = g_polls_left[IndexOf(comm)];
  if (c.state == ncclInProgress && left.load() >= 0 && left.fetch_sub(1) <= 0) {
    c.state = g_fake.state_after_init.load();
  }
  *state = static_cast<ncclResult_t>(c.state.load());
  return ncclSuccess;
}
ncclResult_t FakeAbort(ncclComm_t comm) {
  Of(comm)->aborted = true;
  g_fake.aborts.fetch_add(1);
  return ncclSuccess;
}
const char* FakeErrorString(ncclResult_t r) {
  return r == ncclRemoteError ? "remote process exited or there was a network error"
                              : "fake NCCL error";
}

// Installs the fake for one test and restores the real library and the default timeout after.
class NcclComm : public ::testing::Test {
 protected:
  void SetUp() override {
    g_fake.inits = 0;
    g_fake.aborts = 0;
    g_fake.nonblocking_inits = 0;
    g_fake.state_after_init = ncclSuccess;
    g_fake.polls_to_settle = 3;
    g_fake.next = 0;
    api_.version = 22809;
    api_.GetUniqueId = FakeGetUniqueId;
    api_.CommInitRankConfig = FakeInit;
    api_.CommGetAsyncError = FakeGetAsyncError;
    api_.CommAbort = FakeAbort;
    api_.GetErrorString = FakeErrorString;
    SetNcclForTesting(&api_);
  }
  void TearDown() override {
    SetNcclForTesting(nullptr);
    SetNcclSetupTimeout(30);
  }
  NcclApi api_;
};

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST_F(NcclComm, IsMadeNonBlockingAndPolledUntilNcclHasFinished) {
  RunOnThreadWorld(2, [](Communicator& comm) {
    auto nc = NcclCommFor(comm, 0);
    ASSERT_TRUE(nc.ok()) << nc.status().ToString();
    EXPECT_EQ(Of(*nc)->state.load(), ncclSuccess) << "returned before NCCL had finished";
    auto again = NcclCommFor(comm, 0);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, *nc);
    ForgetNcclComms(comm);
  });
  EXPECT_EQ(g_fake.inits.load(), 2);
  EXPECT_EQ(g_fake.nonblocking_inits.load(), 2);
  EXPECT_EQ(g_fake.aborts.load(), 2);  // ForgetNcclComms aborts: destroy would wait for peers
}

// A rank that never reaches the set-up (stuck before it) must not hold the others for ever.
TEST_F(NcclComm, SetUpThatNeverFinishesFailsAtTheSetUpTimeoutOnEveryRank) {
  g_fake.polls_to_settle = -1;
  SetNcclSetupTimeout(0.2);
  std::atomic<int> failed{0};
  RunOnThreadWorld(3, [&](Communicator& comm) {
    const Clock::time_point start = Clock::now();
    auto nc = NcclCommFor(comm, 0);
    EXPECT_LT(SecondsSince(start), 5.0);
    ASSERT_FALSE(nc.ok());
    EXPECT_EQ(nc.status().code(), StatusCode::kDeadlineExceeded);
    const std::string m = nc.status().message();
    EXPECT_NE(m.find("the NCCL communicator of 3 ranks on cuda:0 (this is rank " +
                     std::to_string(comm.Rank()) + ")"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("ncclCommInitRankConfig"), std::string::npos) << m;
    EXPECT_NE(m.find("KOLO_START_TIMEOUT"), std::string::npos) << m;
    // Not tried again by this rank alone: a peer whose set-up finished would never join.
    auto again = NcclCommFor(comm, 0);
    EXPECT_EQ(again.status().code(), StatusCode::kUnavailable) << again.status().ToString();
    failed.fetch_add(1);
    ForgetNcclComms(comm);
  });
  EXPECT_EQ(failed.load(), 3);
  EXPECT_EQ(g_fake.aborts.load(), 3) << "a communicator that timed out must be aborted";
  EXPECT_EQ(g_fake.inits.load(), 3);
}

// A peer that is gone ends the wait too, when no timeout would (KOLO_START_TIMEOUT=0).
class GoneAfterStart : public LoopbackCommunicator {
 public:
  using LoopbackCommunicator::LoopbackCommunicator;
  Status CheckLiveness() override { return UnavailableError("rank 1 (pid 124 on host) is gone"); }
};

TEST_F(NcclComm, SetUpEndsWhenAPeerIsGoneEvenWithoutATimeout) {
  g_fake.polls_to_settle = -1;
  SetNcclSetupTimeout(0);
  GoneAfterStart comm(std::make_shared<LoopbackWorld>(1, std::chrono::seconds(10)), 0);
  const Clock::time_point start = Clock::now();
  auto nc = NcclCommFor(comm, 0);
  EXPECT_LT(SecondsSince(start), 5.0);
  ASSERT_FALSE(nc.ok());
  EXPECT_EQ(nc.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(nc.status().message().find("rank 1 (pid 124 on host) is gone"), std::string::npos)
      << nc.status().message();
  EXPECT_EQ(g_fake.aborts.load(), 1);
}

// A collective NCCL has not finished (its first connection waits for the peers) is polled under
// the lease; the set-up timeout ends it, and the communicator is aborted and stays so.
TEST_F(NcclComm, ACallStillInProgressAtTheTimeoutAbortsTheCommunicator) {
  auto world = std::make_shared<LoopbackWorld>(1, std::chrono::seconds(10));
  LoopbackCommunicator comm(world, 0);
  auto lease = LeaseNcclComm(comm, 0);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  Of(lease->get())->state = ncclInProgress;  // connecting, and nobody else comes
  SetNcclSetupTimeout(0.2);
  const Clock::time_point start = Clock::now();
  Status s = lease->Settle(ncclInProgress, "ncclAllReduce");
  EXPECT_LT(SecondsSince(start), 5.0);
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("ncclAllReduce: the NCCL communicator of 1 ranks on cuda:0"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(Of(lease->get())->aborted.load());
  ForgetNcclComms(comm);
}

// The finaliser aborts a communicator from its own thread when other work on it fails; a call
// still in progress on the background thread holds the lease, and must give it up at once.
TEST_F(NcclComm, AnAbortFromAnotherThreadEndsACallStillInProgress) {
  auto world = std::make_shared<LoopbackWorld>(1, std::chrono::seconds(10));
  LoopbackCommunicator comm(world, 0);
  const NcclWatch watch = [&] {
    auto nc = NcclCommFor(comm, 0);
    EXPECT_TRUE(nc.ok()) << nc.status().ToString();
    return WatchNccl(comm, 0);
  }();
  std::atomic<bool> aborted{false};
  Status settled;
  std::thread finaliser;
  {
    auto lease = LeaseNcclComm(comm, 0);
    ASSERT_TRUE(lease.ok()) << lease.status().ToString();
    Of(lease->get())->state = ncclInProgress;
    finaliser = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      AbortNccl(watch);  // waits for the lease
      aborted = true;
    });
    const Clock::time_point start = Clock::now();
    settled = lease->Settle(ncclInProgress, "ncclAllReduce");
    EXPECT_LT(SecondsSince(start), 5.0);  // the timeout is 30 s
    EXPECT_FALSE(aborted.load()) << "aborted under a live lease";
  }  // the lease goes: the abort proceeds
  finaliser.join();
  EXPECT_TRUE(aborted.load());
  EXPECT_EQ(settled.code(), StatusCode::kUnavailable);
  EXPECT_NE(settled.message().find("was aborted after a failure elsewhere while NCCL was "
                                   "connecting"),
            std::string::npos)
      << settled.message();
  EXPECT_EQ(g_fake.aborts.load(), 1);
  EXPECT_EQ(CheckNccl(watch).code(), StatusCode::kUnavailable);
  ForgetNcclComms(comm);
}

// An error NCCL reports for a call (a peer's process exited) names the call and the ranks, and
// aborts the communicator.
TEST_F(NcclComm, AnErrorOfACallInProgressNamesItAndAborts) {
  auto world = std::make_shared<LoopbackWorld>(1, std::chrono::seconds(10));
  LoopbackCommunicator comm(world, 0);
  auto lease = LeaseNcclComm(comm, 0);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  Of(lease->get())->state = ncclRemoteError;
  Status s = lease->Settle(ncclInProgress, "ncclGroupEnd");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(),
            "the NCCL communicator of 1 ranks on cuda:0 (this is rank 0): ncclGroupEnd failed: "
            "NCCL 2.28.9: remote process exited or there was a network error");
  EXPECT_TRUE(Of(lease->get())->aborted.load());
  ForgetNcclComms(comm);
}

// After an abort a rank must not make a new communicator on its own: its peers may hold theirs
// (they saw no failure) and would never join, so the next use would hang in set-up. It fails,
// saying what happened and what to do.
TEST_F(NcclComm, AnAbortedCommunicatorIsNotMadeAgainByOneRank) {
  RunOnThreadWorld(2, [](Communicator& comm) {
    ASSERT_TRUE(NcclCommFor(comm, 0).ok());
    if (comm.Rank() == 1) {
      AbortNccl(WatchNccl(comm, 0));
      auto again = NcclCommFor(comm, 0);
      ASSERT_FALSE(again.ok());
      EXPECT_EQ(again.status().code(), StatusCode::kUnavailable);
      EXPECT_NE(again.status().message().find(
                    "the NCCL communicator of 2 ranks on cuda:0 (this is rank 1) was aborted "
                    "after an earlier failure"),
                std::string::npos)
          << again.status().message();
      EXPECT_NE(again.status().message().find("shut kolo down and start again"), std::string::npos);
      auto lease = LeaseNcclComm(comm, 0);
      EXPECT_EQ(lease.status().code(), StatusCode::kUnavailable);
    }
    ForgetNcclComms(comm);
  });
  EXPECT_EQ(g_fake.inits.load(), 2) << "a communicator was made again after the abort";
  EXPECT_EQ(g_fake.aborts.load(), 2);  // rank 1's abort, rank 0's at ForgetNcclComms
}

#endif  // KOLO_WITH_NCCL

}  // namespace
}  // namespace kolo
