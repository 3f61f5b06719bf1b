// StreamCopy (collectives/host/stream_copy.h) copies exactly what memcpy copies, whatever the
// alignment of either end and the length (the streamed body, the unaligned head, the tail), and
// writes nothing outside the destination.
#include "collectives/host/stream_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace kolo {
namespace {

TEST(StreamCopyTest, CopiesExactlyTheBytesAtEveryAlignmentAndLength) {
  constexpr size_t kGuard = 64;
  const size_t lengths[] = {0,    1,    15,   16,   63,   64,    65,    4095,
                            4096, 4097, 4159, 4160, 4161, 65541, 300007};
  for (size_t n : lengths) {
    for (size_t dst_off = 0; dst_off < 18; dst_off += (n > 5000 ? 5 : 1)) {
      for (size_t src_off = 0; src_off < 4; ++src_off) {
        std::vector<uint8_t> src(n + src_off + 1);
        for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
        std::vector<uint8_t> dst(n + dst_off + 2 * kGuard, 0xA5);
        uint8_t* d = dst.data() + kGuard + dst_off;
        StreamCopy(d, src.data() + src_off, n);
        ASSERT_EQ(std::memcmp(d, src.data() + src_off, n), 0)
            << "n " << n << " dst offset " << dst_off << " src offset " << src_off;
        for (size_t i = 0; i < kGuard + dst_off; ++i) {
          ASSERT_EQ(dst[i], 0xA5) << "wrote before the destination: n " << n;
        }
        for (size_t i = kGuard + dst_off + n; i < dst.size(); ++i) {
          ASSERT_EQ(dst[i], 0xA5) << "wrote past the destination: n " << n;
        }
      }
    }
  }
}

}  // namespace
}  // namespace kolo
