// Tier 2: kolo's life cycle under mpirun. init / shutdown / init again, kolo_is_initialized,
// submissions while not initialised, the rank layout against MPI's own answer, and what
// shutdown does to pending operations (on this rank, and on the others).
//
// Every test leaves kolo initialised on every rank (the main initialised it once).
#include <kolo/kolo.h>
#include <mpi.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace kolo_test {
namespace {

class LifecycleTest : public ::testing::Test {
 protected:
  void TearDown() override {
    // Whatever happened, every rank ends initialised. If any rank is not, all shut down and
    // initialise together (kolo_init is collective).
    WorldBarrier();
    int mine = kolo_is_initialized(), all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all == 0) {
      if (mine) kolo_shutdown();
      WorldBarrier();
      const kolo_status_t s = kolo_init();
      EXPECT_EQ(s, KOLO_SUCCESS) << "re-initialising after the test: " << LastError();
    }
    WorldBarrier();
  }
};

// An all-reduce that must succeed and match the reference.
void ExpectAllreduceWorks(const std::string& suffix) {
  const int rank = WorldRank(), size = WorldSize();
  TypedBuffer in = RankUniqueData(KOLO_INT32, 1000, rank, DataKind::kWide, 31);
  TypedBuffer out(KOLO_INT32, 1000);
  Handle h;
  const std::string name = TensorName(suffix);
  ASSERT_EQ(SubmitAllreduce(name, in, &out, {1000}, KOLO_OP_SUM, h), KOLO_SUCCESS) << LastError();
  ASSERT_EQ(kolo_wait(h.get()), KOLO_SUCCESS) << kolo_handle_message(h.get());
  EXPECT_EQ(kolo_poll(h.get()), 1);
  EXPECT_MATCHES_REFERENCE(
      out.data(),
      AllreduceReference(AllRanksData(KOLO_INT32, 1000, size, DataKind::kWide, 31), KOLO_OP_SUM));
}

void ExpectLayoutMatchesMpi() {
  const int rank = WorldRank(), size = WorldSize();
  EXPECT_EQ(kolo_rank(), rank);
  EXPECT_EQ(kolo_size(), size);
  MPI_Comm local = MPI_COMM_NULL, cross = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int local_rank = -1, local_size = -1;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_size(local, &local_size);
  MPI_Comm_split(MPI_COMM_WORLD, local_rank, rank, &cross);
  int cross_rank = -1, cross_size = -1;
  MPI_Comm_rank(cross, &cross_rank);
  MPI_Comm_size(cross, &cross_size);
  MPI_Comm_free(&cross);
  MPI_Comm_free(&local);
  EXPECT_EQ(kolo_local_rank(), local_rank);
  EXPECT_EQ(kolo_local_size(), local_size);
  EXPECT_EQ(kolo_cross_rank(), cross_rank);
  EXPECT_EQ(kolo_cross_size(), cross_size);
  // Consistency of the layout itself.
  EXPECT_GE(kolo_local_rank(), 0);
  EXPECT_LT(kolo_local_rank(), kolo_local_size());
  EXPECT_GE(kolo_cross_rank(), 0);
  EXPECT_LT(kolo_cross_rank(), kolo_cross_size());
  EXPECT_LE(kolo_local_size() * 1, kolo_size());
}

void ExpectNotInitialised() {
  EXPECT_EQ(kolo_is_initialized(), 0);
  EXPECT_EQ(kolo_rank(), -1);
  EXPECT_EQ(kolo_size(), -1);
  EXPECT_EQ(kolo_local_rank(), -1);
  EXPECT_EQ(kolo_local_size(), -1);
  EXPECT_EQ(kolo_cross_rank(), -1);
  EXPECT_EQ(kolo_cross_size(), -1);
  // Every submission is refused with FAILED_PRECONDITION.
  TypedBuffer in(KOLO_FLOAT32, 4), out(KOLO_FLOAT32, 4);
  Handle h1, h2, h3;
  EXPECT_EQ(SubmitAllreduce(TensorName("uninit-ar"), in, &out, {4}, KOLO_OP_SUM, h1),
            KOLO_ERR_FAILED_PRECONDITION);
  EXPECT_STRNE(kolo_last_error(), "");
  EXPECT_EQ(SubmitBroadcast(TensorName("uninit-bc"), in, &out, {4}, 0, h2),
            KOLO_ERR_FAILED_PRECONDITION);
  EXPECT_EQ(SubmitAllgather(TensorName("uninit-ag"), in, {4}, h3), KOLO_ERR_FAILED_PRECONDITION);
}

TEST_F(LifecycleTest, InitializedByMain) {
  EXPECT_EQ(kolo_is_initialized(), 1);
  ExpectLayoutMatchesMpi();
}

TEST_F(LifecycleTest, InitWhenInitializedIsNoOp) {
  EXPECT_EQ(kolo_init(), KOLO_SUCCESS);
  EXPECT_EQ(kolo_is_initialized(), 1);
  ExpectLayoutMatchesMpi();
  ExpectAllreduceWorks("after-second-init");
}

TEST_F(LifecycleTest, ShutdownThenInitAgain) {
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    ExpectAllreduceWorks("before-shutdown");
    WorldBarrier();
    ASSERT_EQ(kolo_shutdown(), KOLO_SUCCESS);
    ExpectNotInitialised();
    kolo_shutdown();  // safe when not initialised
    EXPECT_EQ(kolo_is_initialized(), 0);
    WorldBarrier();
    ASSERT_EQ(kolo_init(), KOLO_SUCCESS) << LastError();
    EXPECT_EQ(kolo_is_initialized(), 1);
    ExpectLayoutMatchesMpi();
    ExpectAllreduceWorks("after-init");
  }
}

// Operations pending on this rank when it shuts down complete with FAILED_PRECONDITION and
// their outputs stay untouched. Each rank's name is its own, so none can complete.
TEST_F(LifecycleTest, ShutdownFailsPendingOpsOnThisRank) {
  const int rank = WorldRank();
  TypedBuffer in = RankUniqueData(KOLO_FLOAT32, 100, rank, DataKind::kWide, 1);
  TypedBuffer out(KOLO_FLOAT32, 100);
  out.FillSentinel();
  const TypedBuffer sentinel = out;
  TypedBuffer g = RankUniqueData(KOLO_INT8, 10, rank, DataKind::kWide, 2);
  Handle h1, h2;
  const std::string n1 = TensorName("only-rank-" + std::to_string(rank));
  const std::string n2 = TensorName("only-rank-ag-" + std::to_string(rank));
  ASSERT_EQ(SubmitAllreduce(n1, in, &out, {100}, KOLO_OP_SUM, h1), KOLO_SUCCESS) << LastError();
  ASSERT_EQ(SubmitAllgather(n2, g, {10}, h2), KOLO_SUCCESS) << LastError();
  // Checked before the barrier: after it, another rank's shutdown may already have failed it.
  EXPECT_EQ(kolo_poll(h1.get()), 0) << "an op only this rank submitted completed";
  WorldBarrier();
  ASSERT_EQ(kolo_shutdown(), KOLO_SUCCESS);
  // Completed by the shutdown (this rank's or an earlier one's): no waiting needed.
  EXPECT_EQ(kolo_poll(h1.get()), 1);
  EXPECT_EQ(kolo_poll(h2.get()), 1);
  EXPECT_EQ(kolo_wait(h1.get()), KOLO_ERR_FAILED_PRECONDITION) << kolo_handle_message(h1.get());
  EXPECT_EQ(kolo_wait(h2.get()), KOLO_ERR_FAILED_PRECONDITION) << kolo_handle_message(h2.get());
  EXPECT_STRNE(kolo_handle_message(h1.get()), "");
  EXPECT_BUFFERS_EQUAL(out, sentinel) << "a pending op failed by shutdown wrote its output";
  WorldBarrier();
  ASSERT_EQ(kolo_init(), KOLO_SUCCESS) << LastError();
  ExpectAllreduceWorks("after-reinit");
  // The names of the failed ops are free again after the re-init (reused with every rank).
  h1.Reset();
  Handle h3;
  TypedBuffer in3 = RankUniqueData(KOLO_FLOAT32, 100, rank, DataKind::kWide, 3);
  const std::string shared = TensorName("only-rank-0");
  ASSERT_EQ(SubmitAllreduce(shared, in3, nullptr, {100}, KOLO_OP_SUM, h3), KOLO_SUCCESS)
      << LastError();
  EXPECT_EQ(WaitHandle(h3, shared), KOLO_SUCCESS) << kolo_handle_message(h3.get());
}

// Once one rank (0) shuts down, the others' pending and later operations fail with
// FAILED_PRECONDITION naming that rank; then everyone shuts down and initialises again.
TEST_F(LifecycleTest, ShutdownOfOneRankFailsTheOthersOps) {
  const int rank = WorldRank();
  TypedBuffer in = RankUniqueData(KOLO_FLOAT64, 50, rank, DataKind::kWide, 4);
  TypedBuffer out(KOLO_FLOAT64, 50);
  out.FillSentinel();
  const TypedBuffer sentinel = out;
  Handle pending;
  const std::string name = TensorName("never-on-rank-0");
  if (rank != 0) {
    ASSERT_EQ(SubmitAllreduce(name, in, &out, {50}, KOLO_OP_SUM, pending), KOLO_SUCCESS)
        << LastError();
  }
  WorldBarrier();
  if (rank == 0) {
    EXPECT_EQ(kolo_shutdown(), KOLO_SUCCESS);
  } else {
    EXPECT_EQ(WaitHandle(pending, name), KOLO_ERR_FAILED_PRECONDITION)
        << kolo_handle_message(pending.get());
    const std::string msg = kolo_handle_message(pending.get());
    EXPECT_NE(msg.find("rank 0"), std::string::npos)
        << "the message does not name rank 0, which shut down: \"" << msg << "\"";
    EXPECT_BUFFERS_EQUAL(out, sentinel);
    // A later operation fails too: refused at submission or failed through its handle.
    Handle later;
    TypedBuffer in2 = RankUniqueData(KOLO_FLOAT64, 50, rank, DataKind::kWide, 5);
    const kolo_status_t s =
        SubmitAllreduce(TensorName("later"), in2, nullptr, {50}, KOLO_OP_SUM, later);
    if (s == KOLO_SUCCESS) {
      EXPECT_EQ(WaitHandle(later, "later"), KOLO_ERR_FAILED_PRECONDITION)
          << kolo_handle_message(later.get());
    } else {
      EXPECT_EQ(s, KOLO_ERR_FAILED_PRECONDITION) << LastError();
    }
    EXPECT_EQ(kolo_shutdown(), KOLO_SUCCESS);
  }
  EXPECT_EQ(kolo_is_initialized(), 0);
  WorldBarrier();
  ASSERT_EQ(kolo_init(), KOLO_SUCCESS) << LastError();
  ExpectLayoutMatchesMpi();
  ExpectAllreduceWorks("after-reinit");
}

// kolo_init and kolo_shutdown read the environment again: a malformed KOLO_* variable is
// refused with INVALID_ARGUMENT (on every rank), and a good one afterwards works.
TEST_F(LifecycleTest, MalformedEnvironmentIsInvalidArgument) {
  WorldBarrier();
  ASSERT_EQ(kolo_shutdown(), KOLO_SUCCESS);
  const char* old = std::getenv("KOLO_FUSION_THRESHOLD");
  const std::string saved = old ? old : "";
  setenv("KOLO_FUSION_THRESHOLD", "not-a-number", 1);
  WorldBarrier();
  EXPECT_EQ(kolo_init(), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_STRNE(kolo_last_error(), "");
  EXPECT_EQ(kolo_is_initialized(), 0);
  if (old) {
    setenv("KOLO_FUSION_THRESHOLD", saved.c_str(), 1);
  } else {
    unsetenv("KOLO_FUSION_THRESHOLD");
  }
  WorldBarrier();
  if (kolo_is_initialized()) kolo_shutdown();  // if the bad value was accepted after all
  WorldBarrier();
  ASSERT_EQ(kolo_init(), KOLO_SUCCESS) << LastError();
  ExpectAllreduceWorks("after-good-env");
}


// Knobs that decide what every rank executes must agree: the fusion threshold and the direct
// size decide how each rank fuses the same Responses (rank 0 fusing two tensors into one call
// while rank 1 makes two gives wrong sums or a hang), the cache capacity the width of the
// negotiation's bit vectors. A rank with another value fails kolo_init on every rank with
// INVALID_ARGUMENT naming the knob, never a corrupted run.
TEST_F(LifecycleTest, KnobsThatShapeExecutionMustAgreeAcrossRanks) {
  const struct {
    const char* knob;
    const char* on_rank0;
    const char* elsewhere;
  } cases[] = {
      {"KOLO_FUSION_THRESHOLD", "0", "134217728"},
      {"KOLO_FUSION_DIRECT_BYTES", "1024", "65536"},
      {"KOLO_FUSION_DIRECT_BYTES", "auto", "65536"},
      {"KOLO_CACHE_CAPACITY", "0", "16"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.knob) + "=" + c.on_rank0 + " on rank 0");
    WorldBarrier();
    ASSERT_EQ(kolo_shutdown(), KOLO_SUCCESS);
    const char* old = std::getenv(c.knob);
    const std::string saved = old ? old : "";
    setenv(c.knob, WorldRank() == 0 ? c.on_rank0 : c.elsewhere, 1);
    WorldBarrier();
    const kolo_status_t s = kolo_init();
    const std::string message = LastError();
    if (old) {
      setenv(c.knob, saved.c_str(), 1);
    } else {
      unsetenv(c.knob);
    }
    EXPECT_EQ(s, KOLO_ERR_INVALID_ARGUMENT) << message;
    EXPECT_NE(message.find(std::string(c.knob) + " must be the same on every rank"),
              std::string::npos)
        << message;
    // The values as the variable spells them ("auto", not its internal -1).
    EXPECT_NE(message.find(std::string("has ") + c.on_rank0), std::string::npos) << message;
    WorldBarrier();
    if (kolo_is_initialized()) kolo_shutdown();  // the mismatch was accepted after all
    WorldBarrier();
    ASSERT_EQ(kolo_init(), KOLO_SUCCESS) << LastError();
    ExpectAllreduceWorks(std::string("after-") + c.knob);
  }
}

}  // namespace
}  // namespace kolo_test
