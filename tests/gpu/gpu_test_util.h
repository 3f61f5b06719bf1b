// What the GPU tests share: the skip when no device is present (the suite passes on CPU-only
// machines and checks for real on a GPU), the poison byte, input values and the dtypes.
#ifndef KOLO_TESTS_GPU_GPU_TEST_UTIL_H_
#define KOLO_TESTS_GPU_GPU_TEST_UTIL_H_

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
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

// Where `got` first differs from `want` (elements of `size` bytes): "element i of n: got <hex>,
// want <hex>, N elements differ", or "" when equal; a failure says more than memcmp's sign.
inline std::string FirstDifference(const uint8_t* got, const uint8_t* want, size_t bytes,
                                   size_t size) {
  size_t first = bytes, differ = 0;
  for (size_t at = 0; at + size <= bytes; at += size) {
    if (std::memcmp(got + at, want + at, size) == 0) continue;
    if (differ++ == 0) first = at;
  }
  if (differ == 0) return "";
  auto hex = [&](const uint8_t* p) {
    std::string text;
    char b[3];
    for (size_t k = size; k-- > 0;) {  // little-endian: the most significant byte first
      std::snprintf(b, sizeof(b), "%02x", p[first + k]);
      text += b;
    }
    return text;
  };
  return "element " + std::to_string(first / size) + " of " + std::to_string(bytes / size) +
         ": got 0x" + hex(got) + ", want 0x" + hex(want) + "; " + std::to_string(differ) +
         " elements differ";
}

// Bytes that hold valid values of every dtype: small integers, or halves/floats from them.
inline std::vector<uint8_t> Values(DataType dtype, size_t count, int seed) {
  return PatternBytes(dtype, count, seed);
}

inline const DataType kAllDtypes[] = {DataType::kUInt8,   DataType::kInt8,    DataType::kUInt16,
                               DataType::kInt16,   DataType::kInt32,   DataType::kInt64,
                               DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
                               DataType::kFloat64, DataType::kBool};

// For the ready-event tests: a float tensor of `n` ones on the current device whose last write,
// a memset to zero, is queued on a framework stream behind 64 copies of 1 GiB (tens of ms even
// on an H200, longer than a negotiation cycle and a kernel launch). A kolo operation
// that waits for `framework` sees zeros; one that does not, ones. `legacy`: the framework's
// stream is CUDA's legacy default stream (torch's usual current stream), else one of its own.
// Freed with the object.
class ZerosBehindACopy {
 public:
  explicit ZerosBehindACopy(size_t n, bool legacy = false) : n_(n), legacy_(legacy) {
    const size_t big = size_t{1} << 30;
    ok_ = cudaMalloc(&tensor_, n * 4) == cudaSuccess && cudaMalloc(&a_, big) == cudaSuccess &&
          cudaMalloc(&b_, big) == cudaSuccess;
    const std::vector<float> ones(n, 1.0f);
    ok_ = ok_ && cudaMemcpy(tensor_, ones.data(), n * 4, cudaMemcpyHostToDevice) == cudaSuccess;
    if (legacy) {
      framework_ = cudaStreamLegacy;
    } else {
      ok_ = ok_ && cudaStreamCreateWithFlags(&framework_, cudaStreamNonBlocking) == cudaSuccess;
    }
    for (int i = 0; i < 64; ++i) {
      ok_ =
          ok_ && cudaMemcpyAsync(b_, a_, big, cudaMemcpyDeviceToDevice, framework_) == cudaSuccess;
    }
    ok_ = ok_ && cudaMemsetAsync(tensor_, 0, n * 4, framework_) == cudaSuccess;
  }
  ~ZerosBehindACopy() {
    if (framework_ && !legacy_) cudaStreamDestroy(framework_);
    cudaFree(tensor_);
    cudaFree(a_);
    cudaFree(b_);
  }
  ZerosBehindACopy(const ZerosBehindACopy&) = delete;
  ZerosBehindACopy& operator=(const ZerosBehindACopy&) = delete;

  bool ok() const { return ok_; }  // every CUDA call of the set-up succeeded
  float* tensor() const { return tensor_; }
  cudaStream_t framework() const { return framework_; }

  // Whether every 4093rd element of `device_data` (n floats) is zero.
  ::testing::AssertionResult AllZero(const void* device_data) const {
    std::vector<float> got(n_);
    if (cudaMemcpy(got.data(), device_data, n_ * 4, cudaMemcpyDeviceToHost) != cudaSuccess) {
      return ::testing::AssertionFailure() << "cudaMemcpy of the result failed";
    }
    for (size_t i = 0; i < n_; i += 4093) {
      if (got[i] != 0.0f) {
        return ::testing::AssertionFailure() << "element " << i << " is " << got[i];
      }
    }
    return ::testing::AssertionSuccess();
  }

 private:
  size_t n_;
  bool legacy_;
  bool ok_ = false;
  float* tensor_ = nullptr;
  void* a_ = nullptr;
  void* b_ = nullptr;
  cudaStream_t framework_ = nullptr;
};

}  // namespace gpu_testing
}  // namespace kolo

#endif  // KOLO_TESTS_GPU_GPU_TEST_UTIL_H_
