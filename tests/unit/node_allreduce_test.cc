// The node-level all-reduces (collectives/host/shm_allreduce.h, hierarchical_allreduce.h) on
// the paths the registry-wide suite does not reach: tiny pieces (hundreds of pieces per call,
// slices of a piece shorter than the rank count), the point-to-point path of the hierarchical
// all-reduce, and a peer that never arrives (kUnavailable naming it, within the wait timeout).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "collectives/select/cost_model.h"
#include "collectives/host/hierarchical_allreduce.h"
#include "collectives/select/registry.h"
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
    // Calls of up to 64 B take the one-barrier path: small and pieced calls interleave on one
    // segment (the slot-parity argument of shm_node.h), in place and out of place.
    algo.reducer().set_small_bytes(64);
    RunCases(comm, algo, &failures, &mu);
  });
  for (const std::string& f : failures) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmPiecesTest, ::testing::Values(2, 3, 4));

// RunScaled: the result multiplied by the postscale in the owners' last pass (and the small
// path's), bit for bit what a sum in rank order and then one multiplication by the factor
// rounded to the dtype give, computed here element by element; on every path (one barrier,
// many pieces, slices shorter than the rank count), in place and out of place.
template <typename T>
std::string CheckScaledSums(Communicator& comm, ShmAllreduce& algo, size_t count, double scale,
                            bool in_place) {
  auto input = [](int rank, size_t i) {
    const uint64_t h =
        (static_cast<uint64_t>(rank) + 1) * 0x9E3779B97F4A7C15ull ^ (i * 0xBF58476D1CE4E5B9ull);
    return static_cast<T>(
        std::ldexp(static_cast<double>(h % 2000003) - 1000001.0, -static_cast<int>(h % 23)));
  };
  std::vector<T> send(count), recv(count, T(-7));
  for (size_t i = 0; i < count; ++i) send[i] = input(comm.Rank(), i);
  T* out = in_place ? send.data() : recv.data();
  AllreduceArgs args{send.data(), out, count,
                     std::is_same_v<T, float> ? DataType::kFloat32 : DataType::kFloat64,
                     ReduceOp::kSum};
  const Status s = algo.RunScaled(comm, args, scale);
  const std::string what = std::string(DataTypeName(args.dtype)) + " count " +
                           std::to_string(count) + (in_place ? " in place" : "") + " rank " +
                           std::to_string(comm.Rank());
  if (!s.ok()) return what + ": " + s.ToString();
  for (size_t i = 0; i < count; ++i) {
    T want = input(0, i);
    for (int r = 1; r < comm.Size(); ++r) want = want + input(r, i);
    want = want * static_cast<T>(scale);
    if (std::memcmp(&want, &out[i], sizeof(T)) != 0) {
      return what + ": index " + std::to_string(i) + " got " + std::to_string(out[i]) + " want " +
             std::to_string(want);
    }
  }
  return "";
}

class ShmScaledTest : public ::testing::TestWithParam<int> {};

TEST_P(ShmScaledTest, ScaledResultIsTheSumTimesTheFactorOnEveryPath) {
  std::vector<std::string> failures;
  std::mutex mu;
  RunOnThreadWorld(GetParam(), "1", [&](Communicator& comm) {
    auto fail = [&](const std::string& f) {
      std::lock_guard<std::mutex> lock(mu);
      if (failures.size() < 20) failures.push_back(f);
    };
    ShmAllreduce algo;
    algo.reducer().set_piece_bytes(200);
    algo.reducer().set_small_bytes(64);
    EXPECT_TRUE(algo.CanRunScaled(DataType::kFloat32));
    EXPECT_TRUE(algo.CanRunScaled(DataType::kFloat64));
    EXPECT_FALSE(algo.CanRunScaled(DataType::kFloat16));
    EXPECT_FALSE(algo.CanRunScaled(DataType::kInt32));
    for (size_t count : {size_t{1}, size_t{2}, size_t{7}, size_t{16}, size_t{100}, size_t{1001}}) {
      for (double scale : {1.0 / comm.Size(), 0.5, 1.0}) {
        for (bool in_place : {false, true}) {
          std::string f = CheckScaledSums<float>(comm, algo, count, scale, in_place);
          if (!f.empty()) fail(f);
          f = CheckScaledSums<double>(comm, algo, count, scale, in_place);
          if (!f.empty()) fail(f);
        }
      }
    }
    // A dtype it cannot scale is refused on every rank before anything is exchanged.
    std::vector<int32_t> ints(10, 1);
    const Status s = algo.RunScaled(
        comm,
        AllreduceArgs{ints.data(), ints.data(), ints.size(), DataType::kInt32, ReduceOp::kSum},
        0.5);
    if (s.code() != StatusCode::kUnimplemented) fail("int32 scaled: " + s.ToString());
  });
  for (const std::string& f : failures) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmScaledTest, ::testing::Values(2, 3));

// Streamed stores (the handover watch's choice in the slow state, forced here): the slots and
// results written with StreamCopy, the owner's last pass into its output and streamed from
// there. Pieces of 20008 B (8 past a multiple of 16: slices and tails start off a line) hold
// copies past StreamCopy's plain-memcpy limit; the same cases and bits as plain stores, with
// Average's postscale folded into the streamed last pass as well.
class ShmStreamedTest : public ::testing::TestWithParam<int> {};

TEST_P(ShmStreamedTest, StreamedStoresGiveTheSameResults) {
  std::vector<std::string> failures;
  std::mutex mu;
  RunOnThreadWorld(GetParam(), "1", [&](Communicator& comm) {
    ShmAllreduce algo;
    algo.reducer().set_piece_bytes(20008);
    algo.reducer().set_small_bytes(64);
    algo.reducer().set_stream_mode(HandoverWatch::Mode::kStreamed);
    RunCases(comm, algo, &failures, &mu);
    for (size_t count : {size_t{4097}, size_t{70001}}) {
      for (bool in_place : {false, true}) {
        std::string f = CheckScaledSums<float>(comm, algo, count, 1.0 / comm.Size(), in_place);
        if (f.empty()) f = CheckScaledSums<double>(comm, algo, count, 0.5, in_place);
        if (!f.empty()) {
          std::lock_guard<std::mutex> lock(mu);
          failures.push_back("streamed: " + f);
        }
      }
    }
  });
  for (const std::string& f : failures) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmStreamedTest, ::testing::Values(2, 3));

// The handover probe on thread worlds (forced where threads outnumber cores): rank 0 probes
// each peer in turn after the second barrier of every piece of a call of at least 64 KiB, and
// each rank streams or not as its probes say. Enough calls for every pair to be probed several
// times; every result checked against the reference. A rank that never probes (KOLO_SHM_STORES
// =plain on one rank only) leaves its partner's probes to time out: slower, never wrong or stuck.
class ShmProbeTest : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(ShmProbeTest, ProbedCallsMatchReference) {
  const auto [ranks, one_rank_plain] = GetParam();
  std::vector<std::string> failures;
  std::mutex mu;
  RunOnThreadWorld(ranks, "1", [&, one_rank_plain = one_rank_plain](Communicator& comm) {
    ShmAllreduce algo;
    algo.reducer().set_piece_bytes(20008);
    algo.reducer().set_probe_shared_cores(true);
    algo.reducer().set_stream_mode(one_rank_plain && comm.Rank() == 1 ? HandoverWatch::Mode::kPlain
                                                                      : HandoverWatch::Mode::kAuto);
    // 17 pieces per call, a probe every HandoverWatch::kProbeEvery pieces: every pair is
    // probed several times.
    const size_t calls = one_rank_plain ? 4 : 8 * static_cast<size_t>(ranks);
    for (size_t c = 0; c < calls; ++c) {
      std::string f = CheckRandomFloat32Sum(comm, algo, 85000 + c);
      if (!f.empty()) {
        std::lock_guard<std::mutex> lock(mu);
        failures.push_back("call " + std::to_string(c) + ": " + f);
      }
    }
  });
  for (const std::string& f : failures) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(Worlds, ShmProbeTest,
                         ::testing::Values(std::make_tuple(2, false), std::make_tuple(3, false),
                                           std::make_tuple(2, true)),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "ranks" +
                                  (std::get<1>(info.param) ? "_one_plain" : "");
                         });

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

// A rank that skipped a collective (it could not take part) must not meet a peer that gave up
// on that collective in the next one: the peer's barrier counter stays where that collective
// left it, and the skipping rank's next barrier reaches that number. The next collective has
// to fail on every rank, naming the peer, instead of reducing against the slots the peer
// filled for the collective it gave up on. The small path (one barrier per call) is where the
// stale slots were reduced and OK returned; the pieced path, whose second barrier saw the flag
// already, must fail the same way. 2 and 3 ranks.
TEST(ShmAllreduceFaultTest, PeerThatGaveUpIsNotMetByTheNextCollective) {
  for (int ranks : {2, 3}) {
    for (size_t count : {size_t{16}, size_t{300000}}) {
      SCOPED_TRACE(std::to_string(ranks) + " ranks, " + std::to_string(count) + " floats");
      std::mutex mu;
      std::vector<std::string> failures;
      RunOnThreadWorld(ranks, "1", [&](Communicator& comm) {
        const int last = comm.Size() - 1;
        ShmAllreduce algo;
        algo.reducer().set_wait_timeout(std::chrono::milliseconds(300));
        // What the last rank gave up on: its own values. What follows: every rank's rank + 1.
        std::vector<float> skipped(count, 100.0f);
        std::vector<float> data(count, static_cast<float>(comm.Rank() + 1));
        // One collective on every rank first: the segment is set up in the first call, by all.
        std::vector<float> warm(count, 1.0f);
        Status warmed = algo.Run(comm, AllreduceArgs{warm.data(), warm.data(), count,
                                                     DataType::kFloat32, ReduceOp::kSum});
        Status first;
        if (comm.Rank() == last) {
          first = algo.Run(comm, AllreduceArgs{skipped.data(), skipped.data(), count,
                                               DataType::kFloat32, ReduceOp::kSum});
        }
        Status met = comm.Barrier();  // the last rank has given up
        Status next = algo.Run(comm, AllreduceArgs{data.data(), data.data(), count,
                                                   DataType::kFloat32, ReduceOp::kSum});
        std::lock_guard<std::mutex> lock(mu);
        const std::string who = "rank " + std::to_string(comm.Rank()) + ": ";
        if (!warmed.ok() || warm[0] != static_cast<float>(ranks)) {
          failures.push_back(who + "the first collective: " + warmed.ToString() + ", element 0 " +
                             std::to_string(warm[0]));
        }
        if (!met.ok()) failures.push_back(who + "loopback barrier: " + met.ToString());
        if (comm.Rank() == last && first.code() != StatusCode::kUnavailable) {
          failures.push_back(who + "the collective alone returned " + first.ToString());
        }
        // The last rank, or (3 ranks) a peer that found it first and gave up in turn.
        const std::string named = "gave up on the all-reduce";
        if (comm.Rank() != last && (next.code() != StatusCode::kUnavailable ||
                                    next.message().find(named) == std::string::npos)) {
          // Only the reference can say whether an OK result is right: every rank's rank + 1.
          const double want = ranks * (ranks + 1) / 2.0;
          failures.push_back(who + "expected kUnavailable naming '" + named + "', got " +
                             next.ToString() + " with element 0 = " + std::to_string(data[0]) +
                             " (the sum of every rank's input is " + std::to_string(want) + ")");
        }
        if (comm.Rank() == last && next.code() != StatusCode::kUnavailable) {
          failures.push_back(who + "the call after giving up returned " + next.ToString());
        }
      });
      for (const std::string& f : failures) ADD_FAILURE() << f;
    }
  }
}

// The selector on one node, on fixed parameters of the kind `kolo-bench --calibrate` writes on
// the 2-vCPU machine (2 ranks: a ring step, in-cache memory, a flag barrier): shm at every size
// when the node shares memory; without it, recursive doubling for small messages and the
// library's own for large ones.
CostModel OneNodeCost() {
  CostModel c;
  c.intra = c.inter = {0.30, 1.94e-4};
  c.gamma_us = 1.75e-5;
  c.copy_us = 2.45e-5;
  c.copy_mem_us = 1.35e-4;
  c.cache_bytes = 32 << 20;
  c.sync_us = 0.15;
  return c;
}

SelectionInput OneNode(int ranks, size_t bytes, bool shm) {
  SelectionInput in;
  in.ranks = ranks;
  in.bytes = bytes;
  in.count = bytes / 4;
  in.dtype = DataType::kFloat32;
  in.op = ReduceOp::kSum;
  in.nodes = 1;
  in.max_local_size = in.min_local_size = ranks;
  in.has_node_context = true;
  in.shm_capable = shm;
  return in;
}

TEST(OneNodeSelectorTest, ShmWhenTheNodeSharesMemory) {
  const AllreduceSelector selector("", OneNodeCost());
  for (int p : {2, 4}) {
    for (size_t bytes : {size_t{8}, size_t{1} << 10, size_t{4} << 10, size_t{64} << 10,
                         size_t{1} << 20, size_t{64} << 20, size_t{256} << 20}) {
      auto pick = selector.Select(OneNode(p, bytes, true));
      ASSERT_TRUE(pick.ok()) << pick.status().ToString();
      EXPECT_EQ((*pick)->Name(), "shm") << p << " ranks, " << bytes << " B";
    }
    auto small = selector.Select(OneNode(p, 8, false));
    ASSERT_TRUE(small.ok());
    EXPECT_EQ((*small)->Name(), "rd") << p << " ranks, no shared memory";
    auto large = selector.Select(OneNode(p, 64 << 20, false));
    ASSERT_TRUE(large.ok());
    EXPECT_EQ((*large)->Name(), "mpi") << p << " ranks, no shared memory";
  }
}

TEST(OneNodeSelectorTest, ShmCostFollowsItsPaths) {
  const CostModel c = OneNodeCost();
  ShmAllreduce shm;
  shm.reducer().set_small_bytes(1024);
  SelectionInput in = OneNode(2, 1024, true);
  in.cost = &c;
  // One barrier, every rank reads both inputs.
  EXPECT_DOUBLE_EQ(shm.EstimateMicros(in), c.sync_us + 2 * 1024 * c.copy_us + 1024 * c.gamma_us);
  in.bytes = 1028;
  EXPECT_DOUBLE_EQ(shm.EstimateMicros(in),
                   2 * 1028 * c.copy_us + 0.5 * 1028 * c.gamma_us + 2 * c.sync_us);
  // 64 MiB over 2 ranks: a 256 MiB node working set, 1/8 of it cached.
  in.bytes = 64 << 20;
  const double n = in.bytes;
  EXPECT_DOUBLE_EQ(c.CopyUs(4 * n), c.copy_us / 8 + c.copy_mem_us * 7 / 8);
  EXPECT_DOUBLE_EQ(shm.EstimateMicros(in), n * c.CopyUs(4 * n) + n * c.copy_us +
                                               0.5 * n * c.gamma_us + 2 * 32 * c.sync_us);
}

// KOLO_SHM_STORES reaches both users of the shared-memory engine through the registry, which
// the runtime and kolo-bench build with the setting's word.
TEST(ShmStoresSetting, TheRegistryGivesItToShmAndHierarchical) {
  const std::pair<const char*, HandoverWatch::Mode> words[] = {
      {"auto", HandoverWatch::Mode::kAuto},
      {"plain", HandoverWatch::Mode::kPlain},
      {"streamed", HandoverWatch::Mode::kStreamed}};
  for (const auto& [word, mode] : words) {
    AllreduceSelector selector("", CostModel(), "", word);
    auto* shm = dynamic_cast<ShmAllreduce*>(selector.Find("shm"));
    auto* hierarchical = dynamic_cast<HierarchicalAllreduce*>(selector.Find("hierarchical"));
    ASSERT_TRUE(shm != nullptr && hierarchical != nullptr);
    EXPECT_EQ(shm->reducer().stream_mode(), mode) << word;
    EXPECT_EQ(hierarchical->reducer().stream_mode(), mode) << word;
  }
}

}  // namespace
}  // namespace kolo::testing
