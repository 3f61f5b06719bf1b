// The whole runtime (enqueue -> negotiate -> fuse -> run -> complete) on N Runtimes in one
// process over the loopback transport, checked against references computed from every rank's
// known inputs.
#include <gtest/gtest.h>

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>

#include "unit/thread_world.h"
#include "unit/typed_data.h"

namespace kolo {
namespace {

using testing::Load;
using testing::Reference;
using testing::RunRuntimes;
using testing::Store;
using testing::Tolerance;
using testing::Value;
using testing::WaitFor;

using testing::FastConfig;

Submission Allreduce(const std::string& name, const void* in, void* out, DataType t,
                     std::vector<int64_t> shape, ReduceOp op) {
  return testing::HostAllreduce(name, in, out, t, std::move(shape), op);
}

// Counts elements that differ from the reference; reports the first.
int CheckAllreduce(const std::vector<char>& out, DataType t, ReduceOp op, int ranks, size_t count,
                   const std::string& what, double pre = 1, double post = 1) {
  int wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    const double want = Reference(t, op, ranks, i, pre, post);
    const double got = Load(t, out.data(), i);
    if (std::fabs(got - want) > Tolerance(t, want)) {
      if (wrong++ == 0) {
        ADD_FAILURE() << what << ": first wrong index " << i << ": expected " << want << ", got "
                      << got;
      }
    }
  }
  return wrong;
}

struct Case {
  int ranks;
  DataType dtype;
  ReduceOp op;
};

class AllreduceEveryDtypeOp : public ::testing::TestWithParam<Case> {};

TEST_P(AllreduceEveryDtypeOp, MatchesReference) {
  const Case c = GetParam();
  const std::vector<size_t> counts = {0, 1, 1000};
  RunRuntimes(c.ranks, FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    std::vector<std::vector<char>> in, out;
    std::vector<std::shared_ptr<Handle>> handles;
    for (size_t k = 0; k < counts.size(); ++k) {
      in.push_back(testing::Buffer(c.dtype, counts[k]));
      out.push_back(testing::Buffer(c.dtype, counts[k]));
      for (size_t i = 0; i < counts[k]; ++i) Store(c.dtype, in.back().data(), i, Value(c.dtype, c.op, rank, i));
    }
    for (size_t k = 0; k < counts.size(); ++k) {
      auto h = rt.Enqueue(Allreduce("t" + std::to_string(k), in[k].data(), out[k].data(), c.dtype,
                                    {static_cast<int64_t>(counts[k])}, c.op));
      ASSERT_TRUE(h.ok()) << h.status().ToString();
      handles.push_back(*h);
    }
    for (size_t k = 0; k < counts.size(); ++k) {
      Status s = WaitFor(*handles[k]);
      ASSERT_TRUE(s.ok()) << s.ToString();
      CheckAllreduce(out[k], c.dtype, c.op, c.ranks, counts[k],
                     "rank " + std::to_string(rank) + " count " + std::to_string(counts[k]));
    }
  });
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (int ranks : {1, 2, 3, 4}) {
    for (int t = 0; t < kNumDataTypes; ++t) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                          ReduceOp::kProduct}) {
        // Average of bool is refused at submission (BadSubmissionsAreRefusedLocally).
        if (t == static_cast<int>(DataType::kBool) && op == ReduceOp::kAverage) continue;
        cases.push_back({ranks, static_cast<DataType>(t), op});
      }
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(ThreadWorld, AllreduceEveryDtypeOp, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return "np" + std::to_string(info.param.ranks) + "_" +
                                  std::string(DataTypeName(info.param.dtype)) + "_" +
                                  std::string(ReduceOpName(info.param.op));
                         });

// Many small tensors of mixed sizes and dtypes, one above the fusion threshold, submitted in a
// different order on every rank, with pieces far smaller than the tensors.
TEST(RuntimeThreadWorld, FusionMixedSizesDtypesAndOrders) {
  Config config = FastConfig();
  config.cycle_time_ms = 5;  // let a whole burst land in one cycle
  config.fusion_threshold_bytes = 4096;
  config.fusion_chunk_bytes = 256;
  const int ranks = 3;
  const DataType types[] = {DataType::kFloat32, DataType::kInt32, DataType::kFloat16,
                            DataType::kFloat64};
  std::vector<size_t> counts;
  for (int k = 0; k < 40; ++k) counts.push_back((k * 37) % 97);
  counts.push_back(5000);  // 20000 bytes as float32: above the threshold, goes alone
  RunRuntimes(ranks, config, [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    const size_t n = counts.size();
    std::vector<std::vector<char>> in(n), out(n);
    std::vector<std::shared_ptr<Handle>> handles(n);
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::rotate(order.begin(), order.begin() + (rank * 7) % n, order.end());
    if (rank % 2) std::reverse(order.begin(), order.end());
    for (size_t k : order) {
      const DataType t = types[k % 4];
      in[k] = testing::Buffer(t, counts[k]);
      out[k] = testing::Buffer(t, counts[k]);
      for (size_t i = 0; i < counts[k]; ++i) Store(t, in[k].data(), i, Value(t, ReduceOp::kSum, rank, i));
      auto h = rt.Enqueue(Allreduce("fused/" + std::to_string(k), in[k].data(), out[k].data(), t,
                                    {static_cast<int64_t>(counts[k])}, ReduceOp::kSum));
      ASSERT_TRUE(h.ok()) << h.status().ToString();
      handles[k] = *h;
    }
    for (size_t k = 0; k < n; ++k) {
      Status s = WaitFor(*handles[k]);
      ASSERT_TRUE(s.ok()) << s.ToString();
      CheckAllreduce(out[k], types[k % 4], ReduceOp::kSum, ranks, counts[k],
                     "tensor " + std::to_string(k));
    }
  });
}

TEST(RuntimeThreadWorld, InPlaceWithScaleFactorsAndDirectPath) {
  Config config = FastConfig();
  config.fusion_direct_bytes = 1024;  // 4096 floats go alone, in place, without a copy
  const int ranks = 3;
  RunRuntimes(ranks, config, [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    for (size_t count : {size_t{10}, size_t{4096}}) {
      std::vector<char> buf = testing::Buffer(DataType::kFloat32, count);
      for (size_t i = 0; i < count; ++i) Store(DataType::kFloat32, buf.data(), i, Value(DataType::kFloat32, ReduceOp::kAverage, rank, i));
      Submission s = Allreduce("inplace/" + std::to_string(count), buf.data(), buf.data(),
                               DataType::kFloat32, {static_cast<int64_t>(count)}, ReduceOp::kAverage);
      s.prescale = 0.5;
      s.postscale = 4.0;
      auto h = rt.Enqueue(s);
      ASSERT_TRUE(h.ok());
      ASSERT_TRUE(WaitFor(**h).ok());
      CheckAllreduce(buf, DataType::kFloat32, ReduceOp::kAverage, ranks, count, "in place", 0.5, 4.0);
    }
  });
}

TEST(RuntimeThreadWorld, ShapeMismatchFailsOnEveryRankThenNextOpWorks) {
  RunRuntimes(2, FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    std::vector<float> in(12, 1.0f), out(12, -7.0f);
    std::vector<int64_t> shape = rank == 0 ? std::vector<int64_t>{3, 4} : std::vector<int64_t>{4, 3};
    auto h = rt.Enqueue(Allreduce("grad/fc1", in.data(), out.data(), DataType::kFloat32, shape,
                                  ReduceOp::kSum));
    ASSERT_TRUE(h.ok());
    Status s = WaitFor(**h);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(),
              "allreduce 'grad/fc1': shape mismatch: rank 0 has [3,4], rank 1 has [4,3]");
    EXPECT_EQ(out[0], -7.0f) << "a failed op must leave the output untouched";
    // The same name works again once the failed op completed.
    auto h2 = rt.Enqueue(Allreduce("grad/fc1", in.data(), out.data(), DataType::kFloat32, {12},
                                   ReduceOp::kSum));
    ASSERT_TRUE(h2.ok());
    ASSERT_TRUE(WaitFor(**h2).ok());
    EXPECT_EQ(out[11], 2.0f);
  });
}

TEST(RuntimeThreadWorld, DtypeAndOpMismatchesNameBothValues) {
  RunRuntimes(3, FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    std::vector<double> in(4, 1.0), out(4);
    Submission a = Allreduce("w", in.data(), out.data(),
                             rank == 2 ? DataType::kInt32 : DataType::kFloat32, {2}, ReduceOp::kSum);
    auto h = rt.Enqueue(a);
    ASSERT_TRUE(h.ok());
    Status s = WaitFor(**h);
    EXPECT_EQ(s.message(), "allreduce 'w': dtype mismatch: ranks 0,1 have float32, rank 2 has int32");
    Submission b = Allreduce("v", in.data(), out.data(), DataType::kFloat64, {4},
                             rank == 1 ? ReduceOp::kMax : ReduceOp::kSum);
    if (rank == 1) b.op = OpType::kBroadcast;
    auto h2 = rt.Enqueue(b);
    ASSERT_TRUE(h2.ok());
    Status s2 = WaitFor(**h2);
    EXPECT_EQ(s2.message(),
              "allreduce 'v': operation mismatch: ranks 0,2 have allreduce, rank 1 has broadcast");
  });
}

// A second submission of a name still in flight is refused on the rank that makes it, and the
// first completes. In each round one rank submits first and tries the duplicate before the
// others submit at all, so its first cannot have completed yet (completion needs every rank).
TEST(RuntimeThreadWorld, NameInFlightIsRefusedAndFirstStillCompletes) {
  for (const int ranks : {2, 3}) {
    std::mutex mu;
    std::condition_variable cv;
    int tried = -1;  // the last round whose first rank has tried its duplicate
    RunRuntimes(ranks, FastConfig(), [&](Runtime& rt) {
      const int rank = rt.layout().rank;
      for (int round = 0; round < ranks; ++round) {
        const std::string name = "dup/" + std::to_string(round);
        std::vector<float> a(8, 1.0f + rank), b(8), c(8);
        if (rank != round) {
          std::unique_lock<std::mutex> lock(mu);
          ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(20), [&] { return tried >= round; }));
        }
        auto h = rt.Enqueue(Allreduce(name, a.data(), b.data(), DataType::kFloat32, {8},
                                      ReduceOp::kSum));
        ASSERT_TRUE(h.ok());
        if (rank == round) {
          auto again = rt.Enqueue(Allreduce(name, a.data(), c.data(), DataType::kFloat32, {8},
                                            ReduceOp::kSum));
          EXPECT_EQ(again.status().code(), StatusCode::kInvalidArgument) << "rank " << rank;
          EXPECT_NE(again.status().message().find("already in flight"), std::string::npos)
              << again.status().message();
          {
            std::lock_guard<std::mutex> lock(mu);
            tried = round;
          }
          cv.notify_all();
        }
        ASSERT_TRUE(WaitFor(**h).ok());
        const float want = static_cast<float>(ranks * (ranks + 1) / 2);  // sum of 1 + rank
        EXPECT_EQ(b[7], want) << "rank " << rank << ", round " << round;
      }
    });
  }
}

TEST(RuntimeThreadWorld, AllgatherDifferentFirstDimensionAndBroadcastFromLastRank) {
  const int ranks = 3;
  RunRuntimes(ranks, FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    // Rank r sends r rows (rank 0 sends none) of 3 int64.
    std::vector<int64_t> rows(rank * 3 + 1);
    for (int i = 0; i < rank * 3; ++i) rows[i] = rank * 100 + i;
    Submission g;
    g.op = OpType::kAllgather;
    g.name = "gather";
    g.input = rows.data();
    g.dtype = DataType::kInt64;
    g.shape = {rank, 3};
    auto h = rt.Enqueue(g);
    ASSERT_TRUE(h.ok());
    ASSERT_TRUE(WaitFor(**h).ok());
    const OutputBuffer& out = (*h)->output();
    ASSERT_EQ(out.shape, (std::vector<int64_t>{0 + 1 + 2, 3}));
    const int64_t* got = static_cast<const int64_t*>(out.data.get());
    size_t k = 0;
    for (int r = 0; r < ranks; ++r) {
      for (int i = 0; i < r * 3; ++i, ++k) EXPECT_EQ(got[k], r * 100 + i) << "index " << k;
    }

    std::vector<float> in(5), outb(5, -1.0f);
    for (int i = 0; i < 5; ++i) in[i] = rank * 10.0f + i;
    Submission b;
    b.op = OpType::kBroadcast;
    b.name = "bcast";
    b.input = in.data();
    b.output = outb.data();
    b.dtype = DataType::kFloat32;
    b.shape = {5};
    b.root = ranks - 1;
    auto hb = rt.Enqueue(b);
    ASSERT_TRUE(hb.ok());
    ASSERT_TRUE(WaitFor(**hb).ok());
    for (int i = 0; i < 5; ++i) EXPECT_EQ(outb[i], (ranks - 1) * 10.0f + i);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(in[i], rank * 10.0f + i) << "input must be untouched";
  });
}

TEST(RuntimeThreadWorld, BadSubmissionsAreRefusedLocally) {
  RunRuntimes(2, FastConfig(), [&](Runtime& rt) {
    std::vector<uint8_t> x(4);
    auto avg_bool = rt.Enqueue(Allreduce("b", x.data(), x.data(), DataType::kBool, {4}, ReduceOp::kAverage));
    EXPECT_EQ(avg_bool.status().code(), StatusCode::kInvalidArgument);
    // Adasum of integers (the algorithm itself: tests/unit/runtime_adasum_test.cc).
    auto adasum = rt.Enqueue(Allreduce("a", x.data(), x.data(), DataType::kUInt8, {4}, ReduceOp::kAdasum));
    EXPECT_EQ(adasum.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(adasum.status().message().find("floating-point"), std::string::npos)
        << adasum.status().message();
    auto neg = rt.Enqueue(Allreduce("n", x.data(), x.data(), DataType::kUInt8, {-1}, ReduceOp::kSum));
    EXPECT_EQ(neg.status().code(), StatusCode::kInvalidArgument);
    // 2^62 float32 elements: the byte count overflows int64, and must not wrap into "small".
    auto huge = rt.Enqueue(Allreduce("h", x.data(), x.data(), DataType::kFloat32,
                                     {int64_t{1} << 62}, ReduceOp::kSum));
    EXPECT_EQ(huge.status().message(),
              "allreduce 'h': shape [4611686018427387904] of float32 is larger than 2^63-1 bytes");
    auto wraps = rt.Enqueue(Allreduce("w", nullptr, nullptr, DataType::kUInt8,
                                      {int64_t{1} << 32, int64_t{1} << 32}, ReduceOp::kSum));
    EXPECT_EQ(wraps.status().code(), StatusCode::kInvalidArgument);
    Submission b = Allreduce("root", x.data(), x.data(), DataType::kUInt8, {4}, ReduceOp::kSum);
    b.op = OpType::kBroadcast;
    b.root = 2;
    auto bad_root = rt.Enqueue(b);
    EXPECT_EQ(bad_root.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(bad_root.status().message().find("root rank 2"), std::string::npos);
  });
}

TEST(RuntimeThreadWorld, ARefusalOnOneRankFailsTheNameOnEveryOtherRank) {
  std::atomic<int> failed_elsewhere{0};
  RunRuntimes(3, FastConfig(), [&](Runtime& rt) {
    const int rank = rt.layout().rank;
    std::vector<float> in(4, 1.0f), out(4, -1.0f);
    Submission b = Allreduce("w", in.data(), out.data(), DataType::kFloat32, {4}, ReduceOp::kSum);
    b.op = OpType::kBroadcast;
    b.root = rank == 1 ? 5 : 0;  // only rank 1 gets it wrong
    auto h = rt.Enqueue(b);
    if (rank == 1) {
      ASSERT_FALSE(h.ok());
      EXPECT_EQ(h.status().message(), "broadcast 'w': root rank 5 is outside [0, 3)");
    } else {
      ASSERT_TRUE(h.ok());
      Status s = WaitFor(**h);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(s.message(), "broadcast 'w': rank 1 refused it: root rank 5 is outside [0, 3)");
      EXPECT_EQ(out[0], -1.0f);
      ++failed_elsewhere;
    }
    // Every rank moves on: the same name works once the refusal has been negotiated (rank 1
    // resubmits only then, or the coordinator would see the name twice from it).
    while (rank == 1 && failed_elsewhere.load() < 2) std::this_thread::yield();
    b.root = 2;
    auto h2 = rt.Enqueue(b);
    ASSERT_TRUE(h2.ok()) << h2.status().ToString();
    ASSERT_TRUE(WaitFor(**h2).ok());
    EXPECT_EQ(out[3], 1.0f);
  });
}

// Rank 1 refuses a broadcast (root out of range) and shuts down at once, while the others wait
// for it: the refusal's reason reaches every waiting rank, not the shutdown that followed it.
TEST(RuntimeThreadWorld, ARefusalFollowedByShutdownStillFailsWithTheRefusal) {
  for (int round = 0; round < 5; ++round) {
    std::atomic<int> submitted{0};
    RunRuntimes(4, FastConfig(), [&](Runtime& rt) {
      const int rank = rt.layout().rank;
      std::vector<float> in(4, 1.0f), out(4, -1.0f);
      Submission b = Allreduce("w", in.data(), out.data(), DataType::kFloat32, {4}, ReduceOp::kSum);
      b.op = OpType::kBroadcast;
      b.root = 0;
      if (rank == 1) {
        while (submitted.load() < 3) std::this_thread::yield();
        b.root = 9;
        EXPECT_FALSE(rt.Enqueue(b).ok());
        rt.Shutdown();
        return;
      }
      auto h = rt.Enqueue(b);
      ASSERT_TRUE(h.ok());
      ++submitted;
      Status s = WaitFor(**h);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "round " << round << ": " << s.ToString();
      EXPECT_EQ(s.message(), "broadcast 'w': rank 1 refused it: root rank 9 is outside [0, 4)")
          << "round " << round;
    });
  }
}

TEST(RuntimeThreadWorld, ShutdownFailsPendingAndLaterOps) {
  std::vector<std::unique_ptr<Runtime>> rts = testing::StartRuntimes(2, FastConfig());
  ASSERT_EQ(rts.size(), 2u);
  // Rank 1 submits a tensor rank 0 never submits, then rank 0 shuts down.
  std::vector<float> v(4, 1.0f);
  auto pending = rts[1]->Enqueue(Allreduce("orphan", v.data(), v.data(), DataType::kFloat32, {4}, ReduceOp::kSum));
  ASSERT_TRUE(pending.ok());
  rts[0]->Shutdown();
  Status s = WaitFor(**pending);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("rank 0 shut down"), std::string::npos) << s.message();
  auto later = rts[1]->Enqueue(Allreduce("later", v.data(), v.data(), DataType::kFloat32, {4}, ReduceOp::kSum));
  EXPECT_EQ(later.status().code(), StatusCode::kFailedPrecondition);
  rts[1]->Shutdown();
}

// The threads of this process (ids from /proc/self/task) and whether each blocks `sig`.
std::map<int, bool> ThreadsBlocking(int sig) {
  std::map<int, bool> out;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return out;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream status(std::string("/proc/self/task/") + e->d_name + "/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("SigBlk:", 0) != 0) continue;
      const unsigned long long mask = std::stoull(line.substr(7), nullptr, 16);
      out[std::atoi(e->d_name)] = (mask >> (sig - 1)) & 1;
    }
  }
  closedir(dir);
  return out;
}

// A peer's reset TCP connection raises SIGPIPE in the thread that writes to it (Open MPI's
// writev), and SIGPIPE's default action ends the process silently: every thread the runtime
// starts blocks it from its start (base/broken_pipe.h), so the write fails instead. The thread
// that starts the runtime keeps its own mask.
TEST(RuntimeThreadWorld, RuntimeThreadsBlockSigpipe) {
  // The runtimes' threads must block it themselves: their creator, this thread, does not.
  sigset_t pipe_only, old;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  ASSERT_EQ(pthread_sigmask(SIG_UNBLOCK, &pipe_only, &old), 0);
  const int self = static_cast<int>(syscall(SYS_gettid));
  const std::map<int, bool> before = ThreadsBlocking(SIGPIPE);
  ASSERT_FALSE(before.empty()) << "cannot read /proc/self/task";
  std::vector<std::unique_ptr<Runtime>> rts = testing::StartRuntimes(2, FastConfig());
  ASSERT_EQ(rts.size(), 2u);
  int started = 0;
  const std::map<int, bool> after = ThreadsBlocking(SIGPIPE);
  for (const auto& [tid, blocked] : after) {
    if (before.count(tid)) continue;
    ++started;
    EXPECT_TRUE(blocked) << "thread " << tid << " started with the runtimes does not block SIGPIPE";
  }
  EXPECT_GE(started, 2) << "one background thread per runtime";
  EXPECT_FALSE(after.at(self)) << "starting the runtimes left SIGPIPE blocked in their creator";
  for (auto& rt : rts) rt->Shutdown();
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace
}  // namespace kolo
