// shm's list all-reduce (ShmAllreduce::RunList, ShmNodeReducer::RunParts/RunSmallParts): the
// tensors of a fused response reduced in their own buffers as one concatenation. Each element
// is checked against the reference computed here from every rank's known inputs, in the
// dtype's own arithmetic and rank order (the bits shm gives for one buffer), on layouts whose
// tensors start and end anywhere against the pieces and slices: empty tensors, tensors shorter
// than a slice, tensors across many pieces. Guard elements between the tensors must come back
// untouched. Both paths (one barrier, pieces), plain and streamed stores, in place and out of
// place, with Average's scale folded in.
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "collectives/host/shm_allreduce.h"
#include "unit/list_check.h"
#include "unit/thread_world.h"

namespace kolo::testing {
namespace {

// Layouts against pieces of 200 bytes (50 float32, 25 float64 elements) and a one-barrier
// limit of 64 bytes: tensors far shorter than a piece or a slice, empty ones anywhere, one
// across many pieces, and a whole list under the one-barrier limit.
std::vector<std::vector<size_t>> Layouts() {
  std::vector<std::vector<size_t>> layouts = {
      {5},          {0, 3, 0},   {1, 1, 1, 1, 1, 1, 1}, {7, 0, 0, 9},
      {100, 0, 37}, {1, 250, 2}, {49, 51, 50, 1},       {0},
  };
  std::vector<size_t> many;
  for (size_t k = 0; k < 40; ++k) many.push_back((k * 37) % 23);  // zeros among them
  layouts.push_back(many);
  return layouts;
}

void RunLayouts(Communicator& comm, ShmAllreduce& algo, std::vector<std::string>* failures,
                std::mutex* mu) {
  auto fail = [&](const std::string& f) {
    if (f.empty()) return;
    std::lock_guard<std::mutex> lock(*mu);
    if (failures->size() < 20) failures->push_back(f);
  };
  // Every check on every rank, whatever failed before: each is one collective call, and a rank
  // that skipped one would leave the others waiting at its barrier.
  for (const std::vector<size_t>& counts : Layouts()) {
    for (bool in_place : {false, true}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kProduct}) {
        fail(CheckList<float>(comm, algo, counts, op, 1.0, in_place));
        fail(CheckList<double>(comm, algo, counts, op, 1.0, in_place));
        fail(CheckList<int32_t>(comm, algo, counts, op, 1.0, in_place));
      }
      fail(CheckList<float>(comm, algo, counts, ReduceOp::kSum, 1.0 / comm.Size(), in_place));
      fail(CheckList<double>(comm, algo, counts, ReduceOp::kSum, 0.5, in_place));
    }
  }
}

class ShmListTest : public ::testing::TestWithParam<int> {};

TEST_P(ShmListTest, TensorsReducedInTheirOwnBuffersMatchReference) {
  std::vector<std::string> failures;
  std::mutex mu;
  RunOnThreadWorld(GetParam(), "1", [&](Communicator& comm) {
    ShmAllreduce algo;
    EXPECT_TRUE(algo.RunsLists(DataType::kFloat32));
    EXPECT_TRUE(algo.RunsLists(DataType::kInt32));
    EXPECT_FALSE(algo.RunsLists(DataType::kFloat16));  // the executor widens those in a buffer
    algo.reducer().set_piece_bytes(200);
    algo.reducer().set_small_bytes(64);
    RunLayouts(comm, algo, &failures, &mu);
  });
  for (const std::string& f : failures) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmListTest, ::testing::Values(1, 2, 3, 4));

// Streamed stores: the slots' copy-in and the owner's result go past the cache, the owner's
// last pass into each tensor's output and streamed from there. Pieces of 20008 B, so that
// copies pass StreamCopy's plain limit and tensors start off a cache line.
TEST(ShmListStreamedTest, StreamedStoresGiveTheReferenceBits) {
  for (int ranks : {2, 3}) {
    std::vector<std::string> failures;
    std::mutex mu;
    RunOnThreadWorld(ranks, "1", [&](Communicator& comm) {
      ShmAllreduce algo;
      algo.reducer().set_piece_bytes(20008);
      algo.reducer().set_small_bytes(64);
      algo.reducer().set_stream_mode(HandoverWatch::Mode::kStreamed);
      for (const std::vector<size_t>& counts :
           {std::vector<size_t>{4099, 0, 2, 9000, 1}, std::vector<size_t>{12000, 12000}}) {
        for (bool in_place : {false, true}) {
          for (const std::string& f :
               {CheckList<float>(comm, algo, counts, ReduceOp::kSum, 1.0 / ranks, in_place),
                CheckList<double>(comm, algo, counts, ReduceOp::kMax, 1.0, in_place)}) {
            if (f.empty()) continue;
            std::lock_guard<std::mutex> lock(mu);
            failures.push_back("streamed: " + f);
          }
        }
      }
    });
    for (const std::string& f : failures) ADD_FAILURE() << f;
  }
}

// The default piece (2 MiB): a model-like list of a few large tensors among small ones.
TEST(ShmListDefaultPieceTest, LargeAndSmallTensorsTogether) {
  std::vector<std::string> failures;
  std::mutex mu;
  RunOnThreadWorld(2, "1", [&](Communicator& comm) {
    ShmAllreduce algo;
    const std::vector<size_t> counts = {64, 589824, 256, 0, 1048576, 10, 300001};
    for (bool in_place : {false, true}) {
      std::string f = CheckList<float>(comm, algo, counts, ReduceOp::kSum, 0.5, in_place);
      if (!f.empty()) {
        std::lock_guard<std::mutex> lock(mu);
        failures.push_back(f);
      }
    }
  });
  for (const std::string& f : failures) ADD_FAILURE() << f;
}

// A dtype it cannot scale is refused before anything is exchanged, on every rank.
TEST(ShmListRefusalTest, ScaledIntegersAreRefusedOnEveryRank) {
  RunOnThreadWorld(2, "1", [&](Communicator& comm) {
    ShmAllreduce algo;
    std::vector<int32_t> a(10, 1);
    const Status s = algo.RunList(comm, {AllreducePart{a.data(), a.data(), a.size()}},
                                  DataType::kInt32, ReduceOp::kSum, 0.5);
    EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s.ToString();
    EXPECT_EQ(a[0], 1);
  });
}

}  // namespace
}  // namespace kolo::testing
