// Tier 2: kolo started on part of MPI_COMM_WORLD: kolo_init_ranks (a list of world ranks, in
// the order given) and kolo_init_comm (the application's communicator). The members' layout,
// an all-reduce against the reference of exactly the members' inputs, a process set inside the
// subset; the ranks left out fail at once (or never take part) instead of waiting.
//
// Every test leaves kolo initialised on every rank over MPI_COMM_WORLD (the main's state).
// <mpi.h> first: kolo.h declares kolo_init_comm only after it.
#include <mpi.h>
#include <kolo/kolo.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <string>
#include <vector>

#include "test_util.h"

namespace kolo_test {
namespace {

using Clock = std::chrono::steady_clock;

class InitSubsetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WorldBarrier();
    kolo_shutdown();
    WorldBarrier();
  }
  void TearDown() override {
    kolo_shutdown();
    WorldBarrier();
    const kolo_status_t s = kolo_init();
    EXPECT_EQ(s, KOLO_SUCCESS) << "re-initialising over MPI_COMM_WORLD: " << LastError();
    WorldBarrier();
  }
};

// An all-reduce on `process_set` of kolo's current world, whose members are the world ranks
// `members` (in kolo's rank order); the reference is built from exactly their inputs.
void ExpectSubsetAllreduce(const std::vector<int>& members, const std::string& suffix,
                           int process_set = 0) {
  const int count = 777;
  std::vector<TypedBuffer> inputs;
  for (int world_rank : members) {
    inputs.push_back(RankUniqueData(KOLO_INT64, count, world_rank, DataKind::kWide, 17));
  }
  TypedBuffer in = RankUniqueData(KOLO_INT64, count, WorldRank(), DataKind::kWide, 17);
  TypedBuffer out(KOLO_INT64, count);
  Handle h;
  const int64_t shape[1] = {count};
  ASSERT_EQ(kolo_allreduce_async_on(process_set, TensorName(suffix).c_str(), in.data(), out.data(),
                                    KOLO_INT64, 1, shape, KOLO_OP_SUM, 1.0, 1.0, h.out()),
            KOLO_SUCCESS)
      << LastError();
  ASSERT_EQ(WaitHandle(h, "allreduce in the subset"), KOLO_SUCCESS)
      << kolo_handle_message(h.get());
  EXPECT_MATCHES_REFERENCE(out.data(), AllreduceReference(inputs, KOLO_OP_SUM));
}

// The world ranks of `members` that share this rank's node (MPI's own answer), in kolo's order.
std::vector<int> MembersOnMyNode(const std::vector<int>& members) {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int node_size = 0;
  MPI_Comm_size(node, &node_size);
  MPI_Group node_group, world_group;
  MPI_Comm_group(node, &node_group);
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  std::vector<int> node_ranks(node_size), world_ranks(node_size);
  for (int i = 0; i < node_size; ++i) node_ranks[i] = i;
  MPI_Group_translate_ranks(node_group, node_size, node_ranks.data(), world_group,
                            world_ranks.data());
  MPI_Group_free(&node_group);
  MPI_Group_free(&world_group);
  MPI_Comm_free(&node);
  std::vector<int> out;
  for (int r : members) {
    if (std::count(world_ranks.begin(), world_ranks.end(), r)) out.push_back(r);
  }
  return out;
}

std::vector<int> AllWorldRanks() {
  std::vector<int> ranks(static_cast<size_t>(WorldSize()));
  std::iota(ranks.begin(), ranks.end(), 0);
  return ranks;
}

TEST_F(InitSubsetTest, RanksInTheOrderGivenAndTheOthersFailAtOnce) {
  // The last world rank and rank 0, in that order: kolo rank 0 is world rank size-1.
  const int last = WorldSize() - 1;
  const std::vector<int> members = {last, 0};
  const bool member = WorldRank() == 0 || WorldRank() == last;
  const std::vector<int> local = MembersOnMyNode(members);  // collective over MPI_COMM_WORLD
  const auto start = Clock::now();
  const kolo_status_t s = kolo_init_ranks(members.data(), static_cast<int>(members.size()));
  if (!member) {
    EXPECT_EQ(s, KOLO_ERR_INVALID_ARGUMENT);
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(2)) << "a rank left out waited";
    const std::string list = "[" + std::to_string(last) + ",0]";
    EXPECT_NE(LastError().find(list), std::string::npos) << LastError();
    EXPECT_NE(LastError().find("MPI_COMM_WORLD rank " + std::to_string(WorldRank())),
              std::string::npos) << LastError();
    EXPECT_EQ(kolo_is_initialized(), 0);
    return;
  }
  ASSERT_EQ(s, KOLO_SUCCESS) << LastError();
  EXPECT_EQ(kolo_size(), 2);
  EXPECT_EQ(kolo_rank(), WorldRank() == last ? 0 : 1);
  EXPECT_EQ(kolo_local_size(), static_cast<int>(local.size()));
  EXPECT_EQ(kolo_local_rank(),
            std::find(local.begin(), local.end(), WorldRank()) - local.begin());
  ExpectSubsetAllreduce(members, "pair");
  // A process set's ranks are kolo ranks: {0} is world rank `last`.
  const int only = 0;
  int id = -1;
  ASSERT_EQ(kolo_add_process_set(&only, 1, &id), KOLO_SUCCESS) << LastError();
  if (kolo_rank() == 0) {
    EXPECT_EQ(kolo_process_set_size(id), 1);
    ExpectSubsetAllreduce({last}, "set", id);
  }
  EXPECT_EQ(kolo_remove_process_set(id), KOLO_SUCCESS) << LastError();
}

TEST_F(InitSubsetTest, InvalidListsFailOnEveryRankWithoutWaiting) {
  const int size = WorldSize();
  const std::vector<std::pair<std::vector<int>, std::string>> cases = {
      {{}, "empty"},
      {{0, size}, "outside MPI_COMM_WORLD [0, " + std::to_string(size) + ")"},
      {{0, 1, 0}, "listed twice"},
  };
  for (const auto& [ranks, why] : cases) {
    const auto start = Clock::now();
    EXPECT_EQ(kolo_init_ranks(ranks.data(), static_cast<int>(ranks.size())),
              KOLO_ERR_INVALID_ARGUMENT);
    EXPECT_NE(LastError().find(why), std::string::npos) << LastError();
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
    EXPECT_EQ(kolo_is_initialized(), 0);
  }
  EXPECT_EQ(kolo_init_ranks(nullptr, 2), KOLO_ERR_INVALID_ARGUMENT);
}

// kolo_init_with_config: the defaults start on every rank; a list starts on those ranks, as
// kolo_init_ranks; what the struct cannot mean is refused on every rank without waiting.
TEST_F(InitSubsetTest, InitWithConfigFields) {
  kolo_init_config_t config = KOLO_INIT_CONFIG_INIT;
  config.start_timeout_seconds = 20;
  ASSERT_EQ(kolo_init_with_config(&config), KOLO_SUCCESS) << LastError();
  EXPECT_EQ(kolo_size(), WorldSize());
  EXPECT_EQ(kolo_rank(), WorldRank());
  ExpectSubsetAllreduce(AllWorldRanks(), "every");
  kolo_shutdown();
  WorldBarrier();

  const int last = WorldSize() - 1;
  const std::vector<int> members = {last, 0};
  kolo_init_config_t listed = KOLO_INIT_CONFIG_INIT;
  listed.ranks = members.data();
  listed.nranks = 2;
  const kolo_status_t s = kolo_init_with_config(&listed);
  if (WorldRank() == 0 || WorldRank() == last) {
    ASSERT_EQ(s, KOLO_SUCCESS) << LastError();
    EXPECT_EQ(kolo_size(), 2);
    EXPECT_EQ(kolo_rank(), WorldRank() == last ? 0 : 1);
    ExpectSubsetAllreduce(members, "listed");
  } else {
    EXPECT_EQ(s, KOLO_ERR_INVALID_ARGUMENT);
  }
  kolo_shutdown();
  WorldBarrier();

  const auto start = Clock::now();
  EXPECT_EQ(kolo_init_with_config(nullptr), KOLO_ERR_INVALID_ARGUMENT);
  kolo_init_config_t bad = KOLO_INIT_CONFIG_INIT;
  bad.size = 4;
  EXPECT_EQ(kolo_init_with_config(&bad), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("size 4"), std::string::npos) << LastError();
  bad = KOLO_INIT_CONFIG_INIT;
  bad.nranks = 2;
  EXPECT_EQ(kolo_init_with_config(&bad), KOLO_ERR_INVALID_ARGUMENT);
  bad = KOLO_INIT_CONFIG_INIT;
  bad.start_timeout_seconds = 1e9;
  EXPECT_EQ(kolo_init_with_config(&bad), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("start_timeout_seconds"), std::string::npos) << LastError();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(kolo_is_initialized(), 0);
}

TEST_F(InitSubsetTest, CommIsDuplicatedAndItsRanksAreKolos) {
  // Even and odd world ranks, each group in reverse order: two kolo jobs side by side.
  MPI_Comm comm = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, WorldRank() % 2, -WorldRank(), &comm), MPI_SUCCESS);
  std::vector<int> members;
  for (int r = WorldSize() - 1; r >= 0; --r) {
    if (r % 2 == WorldRank() % 2) members.push_back(r);
  }
  ASSERT_EQ(kolo_init_comm(comm), KOLO_SUCCESS) << LastError();
  MPI_Comm_free(&comm);  // kolo keeps its own duplicates
  EXPECT_EQ(kolo_size(), static_cast<int>(members.size()));
  EXPECT_EQ(members[kolo_rank()], WorldRank());
  ExpectSubsetAllreduce(members, "parity");
  kolo_shutdown();
  EXPECT_EQ(kolo_init_comm(MPI_COMM_NULL), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("MPI_COMM_NULL"), std::string::npos) << LastError();
}

}  // namespace
}  // namespace kolo_test
