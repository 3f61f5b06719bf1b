#include "collectives/cuda/device.h"

#include "kolo/config.h"

#include <utility>

#if KOLO_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace kolo {

bool CudaBuilt() { return KOLO_WITH_CUDA != 0; }

#if KOLO_WITH_CUDA

int CudaDeviceCount(std::string* reason) {
  // Asked once per process: the answer does not change, and every submission asks.
  static const std::pair<int, std::string> counted = [] {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      // Clears the sticky "last error" so later CUDA calls do not report this one.
      cudaGetLastError();
      return std::make_pair(0, std::string(cudaGetErrorString(e)));
    }
    return std::make_pair(n, std::string(n == 0 ? "no CUDA device" : ""));
  }();
  if (reason && counted.first == 0) *reason = counted.second;
  return counted.first;
}

PointerKind ClassifyPointer(const void* p) {
  PointerKind kind;
  if (p == nullptr || CudaDeviceCount() == 0) return kind;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();
    return kind;
  }
  if (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged) {
    kind.memory = MemoryKind::kCuda;
    kind.device = attr.device;
  }
  return kind;
}

#else

int CudaDeviceCount(std::string* reason) {
  if (reason) *reason = "kolo was built without CUDA";
  return 0;
}

PointerKind ClassifyPointer(const void*) { return PointerKind(); }

#endif

}  // namespace kolo
