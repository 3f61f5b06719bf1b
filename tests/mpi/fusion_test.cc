// Tier 2: fusion under mpirun. Many small tensors of mixed sizes, dtypes and reduce ops
// submitted back-to-back (so they fuse), with tensors above the fusion threshold in the same
// cycle; a small threshold (KOLO_FUSION_THRESHOLD=65536) and small pieces
// (KOLO_FUSION_CHUNK_BYTES=4096) force fused groups to be split into many pieces. Fixed 20 ms
// cycles (KOLO_WAKE_ON_SUBMIT=0, KOLO_CYCLE_TIME=20) gather a burst of submissions into few
// cycles, so the tensors of one kind fuse, and the negotiation's counters show it. The same
// tensors are submitted in different orders on different ranks and from several threads at once.
// Everything is checked against references computed locally (test_util).
#include <kolo/kolo.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace kolo_test {
namespace {

constexpr const char* kThresholdVar = "KOLO_FUSION_THRESHOLD";
constexpr const char* kChunkVar = "KOLO_FUSION_CHUNK_BYTES";
constexpr const char* kWakeVar = "KOLO_WAKE_ON_SUBMIT";
constexpr const char* kCycleVar = "KOLO_CYCLE_TIME";

// Re-initialises kolo on every rank so that it reads the environment again.
void Reinitialise(const char* why) {
  WorldBarrier();
  EXPECT_EQ(kolo_shutdown(), KOLO_SUCCESS) << why;
  WorldBarrier();
  const kolo_status_t s = kolo_init();
  ASSERT_EQ(s, KOLO_SUCCESS) << why << ": kolo_init: " << LastError();
  ASSERT_EQ(kolo_is_initialized(), 1);
}

// One all-reduce of the mixed set.
struct Spec {
  std::string suffix;
  kolo_dtype_t dtype;
  int64_t count;
  kolo_reduce_op_t op;
  double prescale = 1.0, postscale = 1.0;
  bool in_place = false;
};

// `n` small tensors cycling through all dtypes, sizes and reduce ops (some scaled, some in
// place), plus three tensors above 64 KiB, the direct size where fused tensors are packed
// (on one node with shared memory they fuse too, reduced in their own buffers, unless
// KOLO_FUSION_DIRECT_BYTES says otherwise: tests/mpi/CMakeLists.txt runs both).
std::vector<Spec> MixedSpecs(int n) {
  const std::vector<kolo_dtype_t> dtypes = AllDtypes();
  const std::vector<kolo_reduce_op_t> ops = ReduceOps();
  const int64_t counts[] = {1, 7, 100, 1000, 3000, 10, 257, 4096};
  std::vector<Spec> specs;
  for (int k = 0; k < n; ++k) {
    Spec s;
    s.suffix = "t" + std::to_string(k);
    s.dtype = dtypes[k % dtypes.size()];
    s.count = counts[(k * 5 + k / 8) % 8];
    s.op = ops[(k + k / static_cast<int>(dtypes.size())) % ops.size()];
    if (s.dtype == KOLO_BOOL && s.op == KOLO_OP_AVERAGE) s.op = KOLO_OP_SUM;
    if (s.dtype != KOLO_BOOL && s.op != KOLO_OP_PRODUCT && k % 7 == 3) {
      s.prescale = 0.5;
      s.postscale = (IsFloat(s.dtype) || s.op != KOLO_OP_AVERAGE) ? 2.0 : 1.0;
    }
    s.in_place = k % 3 == 0;
    specs.push_back(s);
  }
  specs.push_back({"big-f32", KOLO_FLOAT32, 40000, KOLO_OP_SUM});               // 160 KB
  specs.push_back({"big-i16", KOLO_INT16, 50000, KOLO_OP_MAX, 1.0, 1.0, true});  // 100 KB
  specs.push_back({"big-f16", KOLO_FLOAT16, 40000, KOLO_OP_AVERAGE});           // 80 KB
  return specs;
}

struct Item {
  Spec spec;
  std::string name;
  uint64_t seed = 0;
  TypedBuffer input, original, output;
  Handle handle;
  bool submitted = false;
};

bool Scaled(const Spec& s) { return s.prescale != 1.0 || s.postscale != 1.0; }

std::unique_ptr<Item> MakeItem(const Spec& spec, const std::string& prefix, uint64_t seed) {
  auto item = std::make_unique<Item>();
  item->spec = spec;
  item->name = TensorName(prefix + spec.suffix);
  item->seed = seed;
  item->input = RankUniqueData(spec.dtype, spec.count, WorldRank(),
                               KindFor(spec.dtype, spec.op, Scaled(spec)), seed);
  item->original = item->input;
  if (!spec.in_place) {
    item->output = TypedBuffer(spec.dtype, spec.count);
    item->output.FillSentinel();
  }
  return item;
}

void Submit(Item& item) {
  const kolo_status_t s =
      SubmitAllreduce(item.name, item.input, item.spec.in_place ? nullptr : &item.output,
                      {item.spec.count}, item.spec.op, item.handle, item.spec.prescale,
                      item.spec.postscale);
  EXPECT_EQ(s, KOLO_SUCCESS) << "rank " << WorldRank() << ": submitting '" << item.name
                             << "': " << LastError();
  item.submitted = s == KOLO_SUCCESS;
}

void WaitAndCheck(Item& item) {
  if (!item.submitted) return;
  const kolo_status_t s = WaitHandle(item.handle, item.name);
  ASSERT_EQ(s, KOLO_SUCCESS) << "'" << item.name << "': " << kolo_handle_message(item.handle.get());
  const Spec& sp = item.spec;
  const Reference ref = AllreduceReference(
      AllRanksData(sp.dtype, sp.count, WorldSize(), KindFor(sp.dtype, sp.op, Scaled(sp)),
                   item.seed),
      sp.op, sp.prescale, sp.postscale);
  const void* result = sp.in_place ? item.input.data() : item.output.data();
  EXPECT_MATCHES_REFERENCE(result, ref)
      << " ('" << item.name << "', " << ReduceOpName(sp.op) << ", pre " << sp.prescale
      << ", post " << sp.postscale << (sp.in_place ? ", in place" : "") << ")";
  if (!sp.in_place) {
    EXPECT_BUFFERS_EQUAL(item.input, item.original) << "'" << item.name << "' input modified";
  }
}

std::vector<std::unique_ptr<Item>> MakeItems(const std::vector<Spec>& specs,
                                             const std::string& prefix, uint64_t seed_base) {
  std::vector<std::unique_ptr<Item>> items;
  for (size_t k = 0; k < specs.size(); ++k) items.push_back(MakeItem(specs[k], prefix, seed_base + k));
  return items;
}

// Submits in the given order (indices into items), then waits for and checks all of them.
void RunInOrder(std::vector<std::unique_ptr<Item>>& items, const std::vector<size_t>& order) {
  for (size_t k : order) Submit(*items[k]);
  for (auto& item : items) WaitAndCheck(*item);
}

std::vector<size_t> Iota(size_t n) {
  std::vector<size_t> v(n);
  std::iota(v.begin(), v.end(), size_t{0});
  return v;
}

class FusionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    SaveEnv(kThresholdVar, &old_threshold_);
    SaveEnv(kChunkVar, &old_chunk_);
    SaveEnv(kWakeVar, &old_wake_);
    SaveEnv(kCycleVar, &old_cycle_);
    setenv(kThresholdVar, "65536", 1);
    setenv(kChunkVar, "4096", 1);
    setenv(kWakeVar, "0", 1);
    setenv(kCycleVar, "20", 1);
    Reinitialise("applying KOLO_FUSION_THRESHOLD=65536 KOLO_FUSION_CHUNK_BYTES=4096 "
                 "KOLO_WAKE_ON_SUBMIT=0 KOLO_CYCLE_TIME=20");
  }
  static void TearDownTestSuite() {
    RestoreEnv(kThresholdVar, old_threshold_);
    RestoreEnv(kChunkVar, old_chunk_);
    RestoreEnv(kWakeVar, old_wake_);
    RestoreEnv(kCycleVar, old_cycle_);
    Reinitialise("restoring the fusion settings");
  }
  void SetUp() override { ASSERT_EQ(kolo_is_initialized(), 1); }

 private:
  struct SavedEnv {
    bool set = false;
    std::string value;
  };
  static void SaveEnv(const char* name, SavedEnv* saved) {
    const char* v = std::getenv(name);
    saved->set = v != nullptr;
    saved->value = v ? v : "";
  }
  static void RestoreEnv(const char* name, const SavedEnv& saved) {
    if (saved.set) {
      setenv(name, saved.value.c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  static SavedEnv old_threshold_, old_chunk_, old_wake_, old_cycle_;
};

FusionTest::SavedEnv FusionTest::old_threshold_;
FusionTest::SavedEnv FusionTest::old_chunk_;
FusionTest::SavedEnv FusionTest::old_wake_;
FusionTest::SavedEnv FusionTest::old_cycle_;

kolo_fusion_stats_t Stats() {
  kolo_fusion_stats_t s = KOLO_FUSION_STATS_INIT;
  EXPECT_EQ(kolo_fusion_stats(&s), KOLO_SUCCESS) << LastError();
  return s;
}

// The same set three times under the same names (like training steps; new data each time).
TEST_F(FusionTest, MixedSizesDtypesAndOpsBackToBack) {
  const std::vector<Spec> specs = MixedSpecs(60);
  for (uint64_t iter = 0; iter < 3; ++iter) {
    SCOPED_TRACE("iteration " + std::to_string(iter));
    auto items = MakeItems(specs, "", 1000 * iter);
    RunInOrder(items, Iota(items.size()));
  }
}

TEST_F(FusionTest, ReversedOrderOnOddRanks) {
  const std::vector<Spec> specs = MixedSpecs(40);
  for (uint64_t iter = 0; iter < 2; ++iter) {
    auto items = MakeItems(specs, "", 5000 + 1000 * iter);
    std::vector<size_t> order = Iota(items.size());
    if (WorldRank() % 2 == 1) std::reverse(order.begin(), order.end());
    RunInOrder(items, order);
  }
}

TEST_F(FusionTest, ShuffledOrderPerRank) {
  const std::vector<Spec> specs = MixedSpecs(40);
  auto items = MakeItems(specs, "", 8000);
  std::vector<size_t> order = Iota(items.size());
  std::mt19937 rng(1234u + static_cast<unsigned>(WorldRank()));
  std::shuffle(order.begin(), order.end(), rng);
  RunInOrder(items, order);
}

TEST_F(FusionTest, SubmittedFromSeveralThreads) {
  constexpr int kThreads = 4;
  const std::vector<Spec> specs = MixedSpecs(48);
  for (uint64_t iter = 0; iter < 2; ++iter) {
    SCOPED_TRACE("iteration " + std::to_string(iter));
    auto items = MakeItems(specs, "", 9000 + 1000 * iter);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&items, t] {
        // Each thread owns every kThreads-th tensor, in an order that differs per rank.
        std::vector<size_t> mine;
        for (size_t k = t; k < items.size(); k += kThreads) mine.push_back(k);
        if ((WorldRank() + t) % 2 == 1) std::reverse(mine.begin(), mine.end());
        for (size_t k : mine) Submit(*items[k]);
        for (size_t k : mine) {
          if (items[k]->submitted) {
            EXPECT_EQ(WaitHandle(items[k]->handle, items[k]->name), KOLO_SUCCESS)
                << kolo_handle_message(items[k]->handle.get());
          }
        }
      });
    }
    for (std::thread& th : threads) th.join();
    for (auto& item : items) WaitAndCheck(*item);
  }
}

TEST_F(FusionTest, ManyTinyTensors) {
  std::vector<Spec> specs;
  for (int k = 0; k < 300; ++k) {
    specs.push_back({"f" + std::to_string(k), KOLO_FLOAT32, 1 + k % 16, KOLO_OP_SUM});
  }
  for (int k = 0; k < 100; ++k) {
    specs.push_back({"i" + std::to_string(k), KOLO_INT8, 1 + k % 5, KOLO_OP_MAX, 1.0, 1.0, k % 2 == 0});
  }
  auto items = MakeItems(specs, "", 12000);
  std::vector<size_t> order = Iota(items.size());
  if (WorldRank() % 2 == 1) std::reverse(order.begin(), order.end());
  const kolo_fusion_stats_t before = Stats();
  RunInOrder(items, order);
  const kolo_fusion_stats_t after = Stats();
  // 400 tensors of two kinds in a burst, over 20 ms cycles: some operation carried several
  // of them. Every tensor is fused at most once.
  const uint64_t fused = after.fused_operations - before.fused_operations;
  const uint64_t tensors = after.fused_tensors - before.fused_tensors;
  EXPECT_GT(fused, 0u) << "no operation carried more than one of the " << specs.size()
                       << " tensors";
  EXPECT_GE(tensors, 2 * fused);
  EXPECT_LE(tensors, specs.size());
}

// The fusion counters' struct grows by fields: NULL and a size below the first version's are
// refused; a larger (later) struct keeps the fields this library does not know.
TEST_F(FusionTest, FusionStatsCheckTheirSize) {
  EXPECT_EQ(kolo_fusion_stats(nullptr), KOLO_ERR_INVALID_ARGUMENT);
  kolo_fusion_stats_t small = KOLO_FUSION_STATS_INIT;
  small.size = sizeof(size_t) + sizeof(uint64_t);  // ends before fused_tensors
  EXPECT_EQ(kolo_fusion_stats(&small), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("KOLO_FUSION_STATS_INIT"), std::string::npos) << LastError();
  struct Later {
    kolo_fusion_stats_t known;
    uint64_t newer;
  } later{KOLO_FUSION_STATS_INIT, 77};
  later.known.size = sizeof(Later);
  ASSERT_EQ(kolo_fusion_stats(&later.known), KOLO_SUCCESS) << LastError();
  EXPECT_EQ(later.newer, 77u);
  EXPECT_GE(later.known.fused_tensors, 2 * later.known.fused_operations);
}

// Much larger than both the threshold and the piece size, odd lengths.
TEST_F(FusionTest, TensorsLargerThanThresholdAndChunk) {
  const std::vector<Spec> specs = {
      {"f64", KOLO_FLOAT64, 200003, KOLO_OP_SUM, 1.0, 1.0, true},
      {"u8", KOLO_UINT8, 100003, KOLO_OP_SUM},
      {"bf16", KOLO_BFLOAT16, 70001, KOLO_OP_SUM},
      {"bool", KOLO_BOOL, 70001, KOLO_OP_PRODUCT},
      {"small", KOLO_INT32, 3, KOLO_OP_MIN},
  };
  auto items = MakeItems(specs, "", 13000);
  RunInOrder(items, Iota(items.size()));
}

// All-reduces, broadcasts and all-gathers in the same cycle.
TEST_F(FusionTest, MixedOperationsInOneCycle) {
  const int rank = WorldRank(), size = WorldSize();
  const std::vector<Spec> specs = MixedSpecs(24);
  auto items = MakeItems(specs, "ar/", 14000);
  struct Bcast {
    std::string name;
    int root;
    TypedBuffer buf;
    Handle h;
    bool submitted = false;
  };
  struct Gather {
    std::string name;
    TypedBuffer in;
    Handle h;
    bool submitted = false;
  };
  std::vector<std::unique_ptr<Bcast>> bcasts;
  std::vector<std::unique_ptr<Gather>> gathers;
  for (size_t k = 0; k < items.size(); ++k) {
    Submit(*items[k]);
    if (k % 3 == 0) {
      auto b = std::make_unique<Bcast>();
      b->name = TensorName("bc/" + std::to_string(k));
      b->root = static_cast<int>(k) % size;
      b->buf = RankUniqueData(KOLO_FLOAT16, 50 + k, rank, DataKind::kWide, 15000 + k);
      const kolo_status_t s = SubmitBroadcast(b->name, b->buf, nullptr, {static_cast<int64_t>(50 + k)},
                                              b->root, b->h);
      EXPECT_EQ(s, KOLO_SUCCESS) << LastError();
      b->submitted = s == KOLO_SUCCESS;
      bcasts.push_back(std::move(b));
    }
    if (k % 4 == 1) {
      auto g = std::make_unique<Gather>();
      g->name = TensorName("ag/" + std::to_string(k));
      g->in = RankUniqueData(KOLO_INT32, (rank + 1) * 3, rank, DataKind::kWide, 16000 + k);
      const kolo_status_t s = SubmitAllgather(g->name, g->in, {rank + 1, 3}, g->h);
      EXPECT_EQ(s, KOLO_SUCCESS) << LastError();
      g->submitted = s == KOLO_SUCCESS;
      gathers.push_back(std::move(g));
    }
  }
  for (auto& item : items) WaitAndCheck(*item);
  for (size_t j = 0; j < bcasts.size(); ++j) {
    Bcast& b = *bcasts[j];
    if (!b.submitted) continue;
    ASSERT_EQ(WaitHandle(b.h, b.name), KOLO_SUCCESS) << kolo_handle_message(b.h.get());
    const size_t k = j * 3;
    EXPECT_BUFFERS_EQUAL(b.buf, RankUniqueData(KOLO_FLOAT16, 50 + k, b.root, DataKind::kWide, 15000 + k))
        << b.name;
  }
  for (size_t j = 0; j < gathers.size(); ++j) {
    Gather& g = *gathers[j];
    if (!g.submitted) continue;
    ASSERT_EQ(WaitHandle(g.h, g.name), KOLO_SUCCESS) << kolo_handle_message(g.h.get());
    const size_t k = j * 4 + 1;
    int64_t rows = 0;
    TypedBuffer want(KOLO_INT32, 0);
    for (int r = 0; r < size; ++r) {
      const TypedBuffer part = RankUniqueData(KOLO_INT32, (r + 1) * 3, r, DataKind::kWide, 16000 + k);
      want.bytes.insert(want.bytes.end(), part.bytes.begin(), part.bytes.end());
      want.count += part.count;
      rows += r + 1;
    }
    const void* data = nullptr;
    int ndim = 0;
    int64_t shape[KOLO_MAX_DIMS] = {0};
    ASSERT_EQ(kolo_handle_output(g.h.get(), &data, &ndim, shape), KOLO_SUCCESS) << g.name;
    ASSERT_EQ(ndim, 2);
    EXPECT_EQ(shape[0], rows);
    EXPECT_EQ(shape[1], 3);
    EXPECT_TRUE(BytesEqual(data, want)) << g.name;
  }
}

}  // namespace
}  // namespace kolo_test
