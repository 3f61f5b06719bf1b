#include "collectives/cuda/device.h"

#include "kolo/config.h"

#include <utility>

#if KOLO_WITH_CUDA
#include <cuda_runtime.h>

#include "collectives/cuda/cuda_call.h"
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

StatusOr<void*> AllocateDeviceMemory(int device, size_t bytes) {
  std::string why;
  if (CudaDeviceCount(&why) <= device || device < 0) {
    return FailedPreconditionError("cuda:" + std::to_string(device) +
                                   ": this process has no such CUDA device" +
                                   (why.empty() ? "" : " (" + why + ")"));
  }
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
  cudaSetDevice(device);
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
  if (previous >= 0) cudaSetDevice(previous);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return ResourceExhaustedError("cudaMalloc of " + std::to_string(bytes) + " bytes on cuda:" +
                                  std::to_string(device) + " failed: " + cudaGetErrorString(e));
  }
  return p;
}

void FreeDeviceMemory(int device, void* p) {
  if (p == nullptr) return;
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
  cudaSetDevice(device);
  cudaFree(p);
  if (previous >= 0) cudaSetDevice(previous);
}

StatusOr<void*> AllocateOnStream(int device, void* stream, size_t bytes) {
  std::string why;
  if (CudaDeviceCount(&why) <= device || device < 0) {
    return FailedPreconditionError("cuda:" + std::to_string(device) +
                                   ": this process has no such CUDA device" +
                                   (why.empty() ? "" : " (" + why + ")"));
  }
  int pools = 0;
  if (cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device) != cudaSuccess) {
    cudaGetLastError();
    pools = 0;
  }
  if (!pools) {
    return UnimplementedError("cuda:" + std::to_string(device) +
                              " has no stream-ordered allocator");
  }
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
  cudaSetDevice(device);
  void* p = nullptr;
  const cudaError_t e = cudaMallocAsync(&p, bytes ? bytes : 1, static_cast<cudaStream_t>(stream));
  if (previous >= 0) cudaSetDevice(previous);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return ResourceExhaustedError("cudaMallocAsync of " + std::to_string(bytes) +
                                  " bytes on cuda:" + std::to_string(device) +
                                  " failed: " + cudaGetErrorString(e));
  }
  return p;
}

void FreeOnStream(int device, void* stream, void* p) {
  if (p == nullptr) return;
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
  cudaSetDevice(device);
  cudaFreeAsync(p, static_cast<cudaStream_t>(stream));
  if (previous >= 0) cudaSetDevice(previous);
}

void FreeStreamOrderedMemory(int device, void* p) {
  if (p == nullptr) return;
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
  cudaSetDevice(device);
  cudaDeviceSynchronize();
  cudaFree(p);
  if (previous >= 0) cudaSetDevice(previous);
}

StatusOr<void*> RecordReadyEvent(int device, void* stream) {
  if (stream == nullptr) return static_cast<void*>(nullptr);
  CudaDeviceScope scope(device);
  cudaEvent_t ev = nullptr;
  KOLO_CUDA_CALL(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  const cudaError_t e = cudaEventRecord(ev, static_cast<cudaStream_t>(stream));
  if (e != cudaSuccess) {
    cudaEventDestroy(ev);
    return CudaError(e, "cudaEventRecord (ready event on the framework's stream)");
  }
  return static_cast<void*>(ev);
}

void DestroyReadyEvent(void* event) {
  if (event != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event));
}

#else

StatusOr<void*> RecordReadyEvent(int, void* stream) {
  if (stream == nullptr) return static_cast<void*>(nullptr);
  return UnimplementedError("a CUDA stream was given, but kolo was built without CUDA");
}

void DestroyReadyEvent(void*) {}

StatusOr<void*> AllocateOnStream(int device, void*, size_t) {
  return UnimplementedError("cuda:" + std::to_string(device) +
                            ": kolo was built without CUDA");
}

void FreeOnStream(int, void*, void*) {}

void FreeStreamOrderedMemory(int, void*) {}

StatusOr<void*> AllocateDeviceMemory(int device, size_t) {
  return UnimplementedError("cuda:" + std::to_string(device) +
                            ": kolo was built without CUDA");
}

void FreeDeviceMemory(int, void*) {}

int CudaDeviceCount(std::string* reason) {
  if (reason) *reason = "kolo was built without CUDA";
  return 0;
}

PointerKind ClassifyPointer(const void*) { return PointerKind(); }

#endif

}  // namespace kolo
