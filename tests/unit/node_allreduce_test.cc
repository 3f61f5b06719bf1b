// The node-level all-reduces (collectives/host/shm_allreduce.h, hierarchical_allreduce.h) on
// the paths the registry-wide suite does not reach: tiny pieces (hundreds of pieces per call,
// slices of a piece shorter than the rank count), the point-to-point path of the hierarchical
// all-reduce, and a peer that never arrives (kUnavailable naming it, within the wait timeout).
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>

#include "collectives/host/hierarchical_allreduce.h"
#include "collectives/host/shm_allreduce.h"
#include "unit/algorithm_check.h"
#include "unit/thread_world.h"

namespace kolo::testing {
namespace {

// Every case of a few dtypes (1, 2, 4 and 8 bytes) x every op x every count, then random
// float32 sums that must be bitwise equal on every rank.
void RunCases(Communicator& comm, AllreduceAlgorithm& algo, std::vector<std::string>* failures,
              std::mutex* mu) {
  auto fail = [&](const std::string& f) {
    std::lock_guard<std::mutex> lock(*mu);
    if (failures->size() < 20) failures->push_back(f);
  };
  int index = 0;
  for (DataType t : {DataType::kUInt8, DataType::kFloat16, DataType::kInt32, DataType::kFloat32,
                     DataType::kFloat64}) {
    for (ReduceOp op : KernelOps()) {
      for (size_t count : AlgorithmCounts(comm.Size(), /*with_large=*/false)) {
        CaseResult r = CheckAllreduceCase(comm, algo, t, op, count, (index++ % 2) == 0);
        if (!r.ran)
          fail(CaseName(algo.Name(), t, op, count, false, comm.Size()) +
               " declined: " + r.declined_why);
        if (!r.failure.empty()) fail(r.failure);
      }
    }
  }
  for (size_t count : {size_t{1}, size_t{1000}, size_t{65537}}) {
    std::string f = CheckRandomFloat32Sum(comm, algo, count);
    if (!f.empty()) fail(f);
  }
}

class ShmPiecesTest : public ::testing::TestWithParam<int> {};

TEST_P(ShmPiecesTest, ManySmallPiecesMatchReference) {
  std::vector<std::string> failures;
  std::mutex mu;
  RunOnThreadWorld(GetParam(), "1", [&](Communicator& comm) {
    ShmAllreduce algo;
    algo.reducer().set_piece_bytes(200);  // 25 float64 or 100 float16 elements per piece
    RunCases(comm, algo, &failures, &mu);
  });
  for (const std::string& f : failures) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmPiecesTest, ::testing::Values(2, 3, 4));

class HierarchicalPathsTest : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(HierarchicalPathsTest, ManySmallPiecesMatchReference) {
  const auto& [grouping, point_to_point] = GetParam();
  const int ranks = grouping == "3+2" ? 5 : grouping == "2x3" ? 6 : 4;
  std::vector<std::string> failures;
  std::mutex mu;
  RunOnThreadWorld(ranks, grouping, [&](Communicator& comm) {
    HierarchicalAllreduce algo;
    algo.reducer().set_piece_bytes(200);
    algo.set_point_to_point(point_to_point);
    RunCases(comm, algo, &failures, &mu);
  });
  for (const std::string& f : failures) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(Groupings, HierarchicalPathsTest,
                         ::testing::Combine(::testing::Values("2x2", "3+2", "1+3", "2x3"),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           std::string s;
                           for (char c : std::get<0>(info.param)) s += (c == '+' ? 'p' : c);
                           return s + (std::get<1>(info.param) ? "_p2p" : "_shm");
                         });

// Rank 2 takes part in the first call (which allocates the segment) and then stays away: the
// others must fail with kUnavailable naming local rank 2 within about the wait timeout, and
// refuse further calls at once instead of waiting again.
TEST(ShmAllreduceFaultTest, AbsentPeerIsReportedNotWaitedForever) {
  std::mutex mu;
  std::vector<std::string> failures;
  RunOnThreadWorld(3, "1", [&](Communicator& comm) {
    ShmAllreduce algo;
    algo.reducer().set_wait_timeout(std::chrono::milliseconds(300));
    std::vector<float> data(1000, 1.0f);
    AllreduceArgs args{data.data(), data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum};
    Status first = algo.Run(comm, args);
    std::unique_lock<std::mutex> lock(mu);
    if (!first.ok()) failures.push_back("first call: " + first.ToString());
    if (comm.Rank() == 2) return;
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    Status second = algo.Run(comm, args);
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    Status third = algo.Run(comm, args);
    lock.lock();
    const std::string who = "rank " + std::to_string(comm.Rank()) + ": ";
    if (second.code() != StatusCode::kUnavailable ||
        second.message().find("local rank 2 of 3 did not reach") == std::string::npos) {
      failures.push_back(who + "expected kUnavailable naming local rank 2, got " +
                         second.ToString());
    }
    if (waited > 5.0) failures.push_back(who + "waited " + std::to_string(waited) + " s");
    if (third.code() != StatusCode::kUnavailable) {
      failures.push_back(who + "the call after the failure returned " + third.ToString());
    }
  });
  for (const std::string& f : failures) ADD_FAILURE() << f;
}

}  // namespace
}  // namespace kolo::testing
