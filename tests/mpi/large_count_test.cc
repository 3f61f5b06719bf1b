// Tier 2: tensors beyond MPI's int counts (more than 2^31-1 elements or bytes). MPI calls take
// int counts, so kolo must cut them; everything on the way (shapes, offsets, fusion planning,
// the allgather displacements) must stay 64-bit. Each buffer is ~2 GiB per rank, so this suite
// runs at 2 ranks only (ctest mpi.large_counts.np2) and checks every element.
#include <kolo/kolo.h>
#include <mpi.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

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

// The values of these tests repeat with a short period, so a buffer is filled by computing one
// block of whole periods and copying it, and checked by comparing block by block: a per-byte
// loop with a modulo took most of this suite's time (2^31 bytes, several passes per rank).
// `value(i)` must equal value(i + period) for every i.
template <typename Value>
std::vector<uint8_t> PatternBlock(int period, Value value) {
  std::vector<uint8_t> block(static_cast<size_t>(period) * 4096);
  for (size_t i = 0; i < block.size(); ++i) block[i] = value(static_cast<int64_t>(i));
  return block;
}

template <typename Value>
void FillPeriodic(uint8_t* p, int64_t n, int period, Value value) {
  const std::vector<uint8_t> block = PatternBlock(period, value);
  const auto b = static_cast<int64_t>(block.size());
  for (int64_t at = 0; at < n; at += b) {
    std::memcpy(p + at, block.data(), static_cast<size_t>(std::min(b, n - at)));
  }
}

// Index of the first byte of p[0, n) that differs from value(i), or -1.
template <typename Value>
int64_t FirstWrong(const uint8_t* p, int64_t n, int period, Value value) {
  const std::vector<uint8_t> block = PatternBlock(period, value);
  const auto b = static_cast<int64_t>(block.size());
  for (int64_t at = 0; at < n; at += b) {
    const int64_t len = std::min(b, n - at);
    if (std::memcmp(p + at, block.data(), static_cast<size_t>(len)) != 0) {
      for (int64_t i = 0; i < len; ++i) {
        if (p[at + i] != block[static_cast<size_t>(i)]) return at + i;
      }
    }
  }
  return -1;
}

TEST(LargeCountTest, AllreduceOfMoreThanIntMaxElements) {
  const int rank = WorldRank(), size = WorldSize();
  Bytes buf = Allocate(kAboveIntMax);
  ASSERT_TRUE(buf);
  uint8_t* p = buf.get();
  FillPeriodic(p, kAboveIntMax, 3, [&](int64_t i) { return static_cast<uint8_t>((i + rank) % 3); });
  Handle h;
  const int64_t shape[1] = {kAboveIntMax};
  ASSERT_EQ(kolo_allreduce_async(TensorName("u8").c_str(), p, p, KOLO_UINT8, 1, shape,
                                 KOLO_OP_SUM, 1.0, 1.0, h.out()),
            KOLO_SUCCESS)
      << LastError();
  ASSERT_EQ(WaitHandle(h, "allreduce of 2^31+7 uint8"), KOLO_SUCCESS)
      << kolo_handle_message(h.get());
  const int64_t first = FirstWrong(p, kAboveIntMax, 3, [&](int64_t i) {
    int expected = 0;
    for (int r = 0; r < size; ++r) expected += static_cast<int>((i + r) % 3);
    return static_cast<uint8_t>(expected);
  });
  EXPECT_EQ(first, -1) << "first wrong index " << first
                       << " (the tail starts at 2^31 = " << (int64_t{1} << 31) << ")";
}

TEST(LargeCountTest, AllgatherOfMoreThanIntMaxBytes) {
  const int rank = WorldRank(), size = WorldSize();
  // Every rank sends just over 2^31 / size bytes, so the output passes 2^31.
  auto rows_of = [&](int r) { return (int64_t{1} << 31) / size + 3 + r; };
  const int64_t mine = rows_of(rank);
  Bytes in = Allocate(mine);
  ASSERT_TRUE(in);
  FillPeriodic(in.get(), mine, 251,
               [&](int64_t i) { return static_cast<uint8_t>((i * 7 + rank) % 251); });
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
  int64_t at = 0;
  for (int r = 0; r < size; ++r) {
    const int64_t first = FirstWrong(o + at, rows_of(r), 251, [&](int64_t i) {
      return static_cast<uint8_t>((i * 7 + r) % 251);
    });
    EXPECT_EQ(first, -1) << "first wrong index " << at + first << " (in rank " << r << "'s part)";
    at += rows_of(r);
  }
}

TEST(LargeCountTest, BroadcastOfMoreThanIntMaxBytes) {
  const int rank = WorldRank(), size = WorldSize();
  Bytes buf = Allocate(kAboveIntMax);
  ASSERT_TRUE(buf);
  uint8_t* p = buf.get();
  const int root = size - 1;
  FillPeriodic(p, kAboveIntMax, 255, [&](int64_t i) {
    return static_cast<uint8_t>(rank == root ? (i * 13) % 255 : 0xA5);
  });
  Handle h;
  const int64_t shape[1] = {kAboveIntMax};
  ASSERT_EQ(kolo_broadcast_async(TensorName("b").c_str(), p, p, KOLO_UINT8, 1, shape, root,
                                 h.out()),
            KOLO_SUCCESS)
      << LastError();
  ASSERT_EQ(WaitHandle(h, "broadcast of 2^31+7 bytes"), KOLO_SUCCESS)
      << kolo_handle_message(h.get());
  const int64_t first = FirstWrong(p, kAboveIntMax, 255,
                                   [](int64_t i) { return static_cast<uint8_t>((i * 13) % 255); });
  EXPECT_EQ(first, -1) << "first wrong index " << first;
}

}  // namespace
}  // namespace kolo_test
