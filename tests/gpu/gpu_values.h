// Input bytes for the GPU checks (tests/gpu/gpu_test.cc, gpu_check_main.cc): values that every
// dtype holds exactly and that survive the scales the checks use (small integers; floats and
// halves made from them), different per element and per seed.
#ifndef KOLO_TESTS_GPU_GPU_VALUES_H_
#define KOLO_TESTS_GPU_GPU_VALUES_H_

#include <cstdint>
#include <cstring>
#include <vector>

#include "base/dtype.h"
#include "collectives/reduce.h"

namespace kolo::gpu_testing {

inline std::vector<uint8_t> PatternBytes(DataType dtype, size_t count, int seed) {
  const size_t es = DataTypeSize(dtype);
  std::vector<uint8_t> out(count * es);
  for (size_t i = 0; i < count; ++i) {
    const int v = static_cast<int>((i * 37 + static_cast<size_t>(seed) * 11) % 101) - 50;
    uint8_t* p = out.data() + i * es;
    switch (dtype) {
      case DataType::kFloat32: { float f = v * 0.37f; std::memcpy(p, &f, 4); break; }
      case DataType::kFloat64: { double d = v * 0.37; std::memcpy(p, &d, 8); break; }
      case DataType::kFloat16: { uint16_t h = FloatToHalf(v * 0.37f); std::memcpy(p, &h, 2); break; }
      case DataType::kBFloat16: { uint16_t b = FloatToBFloat16(v * 0.37f); std::memcpy(p, &b, 2); break; }
      case DataType::kBool: *p = static_cast<uint8_t>(v > 0); break;
      default: {
        const int64_t x = (dtype == DataType::kUInt8 || dtype == DataType::kUInt16) ? v + 50 : v;
        std::memcpy(p, &x, es);  // little-endian: the low bytes are the value
      }
    }
  }
  return out;
}

}  // namespace kolo::gpu_testing

#endif  // KOLO_TESTS_GPU_GPU_VALUES_H_
