// Tier 2: grouped allreduce / allgather / reducescatter through the C API under mpirun:
// results against references over every rank's known inputs for several steps (so the response
// cache serves the group after the first), then one rank changing one member's shape: every
// member fails on every rank, and the group works again afterwards.
#include <kolo/kolo.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace kolo_test {
namespace {

struct Group {
  std::vector<std::string> names;
  std::vector<TypedBuffer> in, out;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<const char*> name_ptrs;
  std::vector<const void*> in_ptrs;
  std::vector<void*> out_ptrs;
  std::vector<kolo_dtype_t> dtypes;
  std::vector<int> ndims;
  std::vector<const int64_t*> shape_ptrs;
  std::vector<kolo_handle_t> handles;

  void Add(const std::string& name, kolo_dtype_t dtype, std::vector<int64_t> shape, uint64_t seed) {
    names.push_back(name);
    shapes.push_back(shape);
    in.push_back(RankUniqueData(dtype, NumElements(shape), WorldRank(), DataKind::kSmall, seed));
    out.emplace_back(dtype, NumElements(shape));
    dtypes.push_back(dtype);
  }
  kolo_status_t Allreduce() {
    name_ptrs.clear(); in_ptrs.clear(); out_ptrs.clear(); ndims.clear(); shape_ptrs.clear();
    for (size_t i = 0; i < names.size(); ++i) {
      name_ptrs.push_back(names[i].c_str());
      in_ptrs.push_back(in[i].data());
      out_ptrs.push_back(out[i].data());
      ndims.push_back(static_cast<int>(shapes[i].size()));
      shape_ptrs.push_back(shapes[i].data());
    }
    handles.assign(names.size(), nullptr);
    return kolo_grouped_allreduce_async_on(0, static_cast<int>(names.size()), name_ptrs.data(),
                                           in_ptrs.data(), out_ptrs.data(), dtypes.data(),
                                           ndims.data(), shape_ptrs.data(), KOLO_OP_SUM, 1.0, 1.0,
                                           handles.data());
  }
};

TEST(GroupedTest, AllreduceGroupRepeatedThenOneMemberMismatched) {
  const std::string base = TensorName("");
  for (int step = 0; step < 5; ++step) {
    Group g;
    g.Add(base + "w", KOLO_FLOAT32, {3, 5}, 1);
    g.Add(base + "b", KOLO_INT64, {7}, 2);
    g.Add(base + "h", KOLO_FLOAT16, {9}, 3);
    const bool broken = step == 3;
    if (broken && WorldRank() == WorldSize() - 1) g.shapes[1] = {6};
    if (broken && WorldRank() == WorldSize() - 1) g.in[1] = TypedBuffer(KOLO_INT64, 6);
    ASSERT_EQ(g.Allreduce(), KOLO_SUCCESS) << LastError();
    std::vector<kolo_status_t> status;
    std::vector<std::string> messages;
    for (kolo_handle_t h : g.handles) {
      status.push_back(kolo_wait(h));
      messages.push_back(kolo_handle_message(h));
      kolo_handle_free(h);
    }
    if (broken) {
      const std::string why = "allreduce '" + base + "b': shape mismatch: ";
      for (size_t i = 0; i < status.size(); ++i) {
        EXPECT_EQ(status[i], KOLO_ERR_INVALID_ARGUMENT) << "member " << i;
        EXPECT_NE(messages[i].find(why), std::string::npos) << messages[i];
        if (i != 1) {
          EXPECT_NE(messages[i].find("grouped with '" + base + "b', which failed"),
                    std::string::npos) << messages[i];
        }
      }
      continue;
    }
    for (size_t i = 0; i < status.size(); ++i) {
      ASSERT_EQ(status[i], KOLO_SUCCESS) << messages[i];
      const uint64_t seed = i + 1;
      EXPECT_MATCHES_REFERENCE(g.out[i].data(),
                               AllreduceReference(AllRanksData(g.dtypes[i], g.in[i].count, WorldSize(),
                                                               DataKind::kSmall, seed),
                                                  KOLO_OP_SUM));
    }
  }
}

// The last rank groups one tensor more than the others: every member fails on every rank, the
// extra one included, promptly (no stall setting needed); then the same group works again.
TEST(GroupedTest, AMemberOnlyTheLastRankGroupedFailsEverywhere) {
  const std::string base = TensorName("");
  const bool last = WorldRank() == WorldSize() - 1;
  for (int step = 0; step < 2; ++step) {
    Group g;
    g.Add(base + "x", KOLO_FLOAT32, {4}, 1);
    g.Add(base + "y", KOLO_FLOAT64, {3}, 2);
    const bool broken = step == 0;
    if (broken && last) g.Add(base + "z", KOLO_FLOAT32, {2}, 3);
    ASSERT_EQ(g.Allreduce(), KOLO_SUCCESS) << LastError();
    for (size_t i = 0; i < g.handles.size(); ++i) {
      const kolo_status_t status = kolo_wait(g.handles[i]);
      const std::string message = kolo_handle_message(g.handles[i]);
      kolo_handle_free(g.handles[i]);
      if (broken) {
        EXPECT_EQ(status, KOLO_ERR_INVALID_ARGUMENT) << "member " << i << ": " << message;
        EXPECT_NE(message.find("the ranks grouped different tensors with '" + base + "x'"),
                  std::string::npos) << message;
        const std::string longer = "rank " + std::to_string(WorldSize() - 1) + " grouped 3";
        EXPECT_NE(message.find(longer), std::string::npos) << message;
        continue;
      }
      ASSERT_EQ(status, KOLO_SUCCESS) << message;
      EXPECT_MATCHES_REFERENCE(g.out[i].data(),
                               AllreduceReference(AllRanksData(g.dtypes[i], g.in[i].count,
                                                               WorldSize(), DataKind::kSmall, i + 1),
                                                  KOLO_OP_SUM));
    }
  }
}

TEST(GroupedTest, AnAllgatherMemberOnlyTheLastRankGroupedFailsEverywhere) {
  const std::string base = TensorName("");
  const bool last = WorldRank() == WorldSize() - 1;
  const std::string a = base + "a", b = base + "b";
  const char* names[2] = {a.c_str(), b.c_str()};
  std::vector<float> x(2, static_cast<float>(WorldRank()));
  const void* inputs[2] = {x.data(), x.data()};
  const kolo_dtype_t dtypes[2] = {KOLO_FLOAT32, KOLO_FLOAT32};
  const int ndims[2] = {1, 1};
  const int64_t xs[1] = {2};
  const int64_t* shapes[2] = {xs, xs};
  kolo_handle_t h[2];
  const int count = last ? 2 : 1;
  ASSERT_EQ(kolo_grouped_allgather_async_on(0, count, names, inputs, dtypes, ndims, shapes, h),
            KOLO_SUCCESS) << LastError();
  for (int i = 0; i < count; ++i) {
    EXPECT_EQ(kolo_wait(h[i]), KOLO_ERR_INVALID_ARGUMENT) << kolo_handle_message(h[i]);
    EXPECT_NE(std::string(kolo_handle_message(h[i])).find("grouped different tensors"),
              std::string::npos) << kolo_handle_message(h[i]);
    kolo_handle_free(h[i]);
  }
  // Then a plain allgather of the same name works.
  kolo_handle_t one;
  ASSERT_EQ(kolo_grouped_allgather_async_on(0, 1, names, inputs, dtypes, ndims, shapes, &one),
            KOLO_SUCCESS) << LastError();
  ASSERT_EQ(kolo_wait(one), KOLO_SUCCESS) << kolo_handle_message(one);
  const void* data = nullptr;
  int nd = 0;
  int64_t out_shape[KOLO_MAX_DIMS];
  ASSERT_EQ(kolo_handle_output(one, &data, &nd, out_shape), KOLO_SUCCESS);
  ASSERT_EQ(out_shape[0], 2 * WorldSize());
  for (int r = 0; r < WorldSize(); ++r) {
    for (int j = 0; j < 2; ++j) EXPECT_EQ(static_cast<const float*>(data)[2 * r + j], r);
  }
  kolo_handle_free(one);
}

TEST(GroupedTest, AllgatherAndReducescatterGroups) {
  const std::string base = TensorName("");
  const int n = WorldSize();
  const char* names[2] = {nullptr, nullptr};
  const std::string a = base + "a", b = base + "b";
  names[0] = a.c_str();
  names[1] = b.c_str();
  std::vector<float> x(2 * (WorldRank() + 1), static_cast<float>(WorldRank()));
  std::vector<float> y(3 * n, 1.0f + WorldRank());
  const void* inputs[2] = {x.data(), y.data()};
  const kolo_dtype_t dtypes[2] = {KOLO_FLOAT32, KOLO_FLOAT32};
  const int ndims[2] = {2, 2};
  const int64_t xs[2] = {WorldRank() + 1, 2}, ys[2] = {n, 3};
  const int64_t* shapes[2] = {xs, ys};
  kolo_handle_t h[2];
  ASSERT_EQ(kolo_grouped_allgather_async_on(0, 2, names, inputs, dtypes, ndims, shapes, h),
            KOLO_SUCCESS) << LastError();
  for (kolo_handle_t handle : h) ASSERT_EQ(kolo_wait(handle), KOLO_SUCCESS) << kolo_handle_message(handle);
  const void* data = nullptr;
  int nd = 0;
  int64_t out_shape[KOLO_MAX_DIMS];
  ASSERT_EQ(kolo_handle_output(h[0], &data, &nd, out_shape), KOLO_SUCCESS);
  EXPECT_EQ(out_shape[0], n * (n + 1) / 2);
  int64_t k = 0;
  for (int r = 0; r < n; ++r) {
    for (int j = 0; j < 2 * (r + 1); ++j, ++k) EXPECT_EQ(static_cast<const float*>(data)[k], r);
  }
  for (kolo_handle_t handle : h) kolo_handle_free(handle);

  const std::string c = base + "c", d = base + "d";
  names[0] = c.c_str();
  names[1] = d.c_str();
  const int64_t ys2[2] = {n, 3};
  const int64_t* shapes2[2] = {ys2, ys2};
  const void* inputs2[2] = {y.data(), y.data()};
  ASSERT_EQ(kolo_grouped_reducescatter_async_on(0, 2, names, inputs2, dtypes, ndims, shapes2,
                                                KOLO_OP_SUM, 1.0, 1.0, h), KOLO_SUCCESS) << LastError();
  for (kolo_handle_t handle : h) {
    ASSERT_EQ(kolo_wait(handle), KOLO_SUCCESS) << kolo_handle_message(handle);
    ASSERT_EQ(kolo_handle_output(handle, &data, &nd, out_shape), KOLO_SUCCESS);
    EXPECT_EQ(out_shape[0], 1);  // n rows shared by n ranks
    for (int j = 0; j < 3; ++j) EXPECT_EQ(static_cast<const float*>(data)[j], n * (n + 1) / 2.0f);
    kolo_handle_free(handle);
  }
}

}  // namespace
}  // namespace kolo_test
