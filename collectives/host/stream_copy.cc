#include "collectives/host/stream_copy.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>  // SSE2, part of every x86-64 CPU: no dispatch needed
#endif

namespace kolo {

void StreamCopy(void* dst, const void* src, size_t n) {
#if defined(__x86_64__)
  if (n >= kStreamCopyMinBytes) {
    auto* d = static_cast<char*>(dst);
    const auto* s = static_cast<const char*>(src);
    // Streaming stores need a 16-byte aligned destination, and fill whole lines best (a
    // write-combining buffer is a line): start the body at a line. The source may be anywhere.
    const size_t head = (64 - reinterpret_cast<uintptr_t>(d) % 64) % 64;
    std::memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    const size_t body = n / 64 * 64;
    for (size_t i = 0; i < body; i += 64) {
      const __m128i v0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
      const __m128i v1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
      const __m128i v2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
      const __m128i v3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), v0);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), v1);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), v2);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), v3);
    }
    std::memcpy(d + body, s + body, n - body);
    _mm_sfence();
    return;
  }
#endif
  std::memcpy(dst, src, n);
}

}  // namespace kolo
