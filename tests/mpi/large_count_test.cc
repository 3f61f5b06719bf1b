// Tier 2: tensors beyond MPI's int counts (more than 2^31-1 elements or bytes). MPI calls take
// int counts, so kolo must cut them; everything on the way (shapes, offsets, fusion planning,
// the allgather displacements) must stay 64-bit. Each buffer is ~2 GiB per rank, so this suite
// runs at 2 ranks only (ctest mpi.large_counts.np2) and checks every element.
#include <kolo/kolo.h>
#include <mpi.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "test_util.h"

namespace kolo_test {
namespace {

struct Free {
  void operator()(void* p) const { std::free(p); }
};
using Bytes = std::unique_ptr<uint8_t, Free>;

Bytes Allocate(int64_t n) {
  Bytes b(static_cast<uint8_t*>(std::malloc(static_cast<size_t>(n))));
  EXPECT_TRUE(b) << "cannot allocate " << n << " bytes";
  return b;
}

constexpr int64_t kAboveIntMax = (int64_t{1} << 31) + 7;

TEST(LargeCountTest, AllreduceOfMoreThanIntMaxElements) {
  const int rank = WorldRank(), size = WorldSize();
  Bytes buf = Allocate(kAboveIntMax);
  ASSERT_TRUE(buf);
  uint8_t* p = buf.get();
  for (int64_t i = 0; i < kAboveIntMax; ++i) p[i] = static_cast<uint8_t>((i + rank) % 3);
  Handle h;
  const int64_t shape[1] = {kAboveIntMax};
  ASSERT_EQ(kolo_allreduce_async(TensorName("u8").c_str(), p, p, KOLO_UINT8, 1, shape,
                                 KOLO_OP_SUM, 1.0, 1.0, h.out()),
            KOLO_SUCCESS)
      << LastError();
  ASSERT_EQ(WaitHandle(h, "allreduce of 2^31+7 uint8"), KOLO_SUCCESS)
      << kolo_handle_message(h.get());
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < kAboveIntMax; ++i) {
    int expected = 0;
    for (int r = 0; r < size; ++r) expected += static_cast<int>((i + r) % 3);
    if (p[i] != expected && wrong++ == 0) first = i;
  }
  EXPECT_EQ(wrong, 0) << "first wrong index " << first << " (the tail starts at 2^31 = "
                      << (int64_t{1} << 31) << ")";
}

TEST(LargeCountTest, AllgatherOfMoreThanIntMaxBytes) {
  const int rank = WorldRank(), size = WorldSize();
  // Every rank sends just over 2^31 / size bytes, so the output passes 2^31.
  auto rows_of = [&](int r) { return (int64_t{1} << 31) / size + 3 + r; };
  const int64_t mine = rows_of(rank);
  Bytes in = Allocate(mine);
  ASSERT_TRUE(in);
  for (int64_t i = 0; i < mine; ++i) in.get()[i] = static_cast<uint8_t>((i * 7 + rank) % 251);
  Handle h;
  const int64_t shape[1] = {mine};
  ASSERT_EQ(kolo_allgather_async(TensorName("g").c_str(), in.get(), KOLO_UINT8, 1, shape, h.out()),
            KOLO_SUCCESS)
      << LastError();
  ASSERT_EQ(WaitHandle(h, "allgather past 2^31 bytes"), KOLO_SUCCESS)
      << kolo_handle_message(h.get());
  in.reset();
  const void* out = nullptr;
  int ndim = 0;
  int64_t out_shape[KOLO_MAX_DIMS];
  ASSERT_EQ(kolo_handle_output(h.get(), &out, &ndim, out_shape), KOLO_SUCCESS);
  int64_t total = 0;
  for (int r = 0; r < size; ++r) total += rows_of(r);
  ASSERT_GT(total, int64_t{INT32_MAX});
  ASSERT_EQ(ndim, 1);
  ASSERT_EQ(out_shape[0], total);
  const uint8_t* o = static_cast<const uint8_t*>(out);
  int64_t wrong = 0, first = -1, k = 0;
  for (int r = 0; r < size; ++r) {
    for (int64_t i = 0; i < rows_of(r); ++i, ++k) {
      if (o[k] != static_cast<uint8_t>((i * 7 + r) % 251) && wrong++ == 0) first = k;
    }
  }
  EXPECT_EQ(wrong, 0) << "first wrong index " << first;
}

TEST(LargeCountTest, BroadcastOfMoreThanIntMaxBytes) {
  const int rank = WorldRank(), size = WorldSize();
  Bytes buf = Allocate(kAboveIntMax);
  ASSERT_TRUE(buf);
  uint8_t* p = buf.get();
  const int root = size - 1;
  for (int64_t i = 0; i < kAboveIntMax; ++i) {
    p[i] = static_cast<uint8_t>(rank == root ? (i * 13) % 255 : 0xA5);
  }
  Handle h;
  const int64_t shape[1] = {kAboveIntMax};
  ASSERT_EQ(kolo_broadcast_async(TensorName("b").c_str(), p, p, KOLO_UINT8, 1, shape, root,
                                 h.out()),
            KOLO_SUCCESS)
      << LastError();
  ASSERT_EQ(WaitHandle(h, "broadcast of 2^31+7 bytes"), KOLO_SUCCESS)
      << kolo_handle_message(h.get());
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < kAboveIntMax; ++i) {
    if (p[i] != static_cast<uint8_t>((i * 13) % 255) && wrong++ == 0) first = i;
  }
  EXPECT_EQ(wrong, 0) << "first wrong index " << first;
}

}  // namespace
}  // namespace kolo_test
