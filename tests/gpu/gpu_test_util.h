// What the GPU tests share: the skip when no device is present (the suite passes on CPU-only
// machines and checks for real on a GPU), the poison byte, input values and the dtypes.
#ifndef KOLO_TESTS_GPU_GPU_TEST_UTIL_H_
#define KOLO_TESTS_GPU_GPU_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "collectives/cuda/device.h"
#include "tests/gpu/gpu_values.h"

namespace kolo {
namespace gpu_testing {

#define KOLO_SKIP_WITHOUT_GPU()                                               \
  do {                                                                        \
    std::string why;                                                          \
    if (CudaDeviceCount(&why) == 0) GTEST_SKIP() << "no CUDA device: " << why; \
  } while (0)

inline constexpr uint8_t kPoison = 0xA5;

// Bytes that hold valid values of every dtype: small integers, or halves/floats from them.
inline std::vector<uint8_t> Values(DataType dtype, size_t count, int seed) {
  return PatternBytes(dtype, count, seed);
}

inline const DataType kAllDtypes[] = {DataType::kUInt8,   DataType::kInt8,    DataType::kUInt16,
                               DataType::kInt16,   DataType::kInt32,   DataType::kInt64,
                               DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
                               DataType::kFloat64, DataType::kBool};

}  // namespace gpu_testing
}  // namespace kolo

#endif  // KOLO_TESTS_GPU_GPU_TEST_UTIL_H_
