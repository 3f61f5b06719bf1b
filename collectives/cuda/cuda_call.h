// KOLO_CUDA_CALL: a CUDA runtime call whose failure returns a Status naming the call and CUDA's
// error string (docs/conventions.md "Errors"). Only in files compiled with CUDA.
#ifndef KOLO_COLLECTIVES_CUDA_CUDA_CALL_H_
#define KOLO_COLLECTIVES_CUDA_CUDA_CALL_H_

#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "base/status.h"

namespace kolo {

inline Status CudaError(cudaError_t e, const char* call) {
  // The error is returned, not left sticky for the next unrelated call.
  cudaGetLastError();
  std::string message =
      std::string(call) + " failed: " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  // Out of memory is the caller's to handle (free a cache, shrink a batch), as a failed host
  // allocation is: kResourceExhausted, which frameworks map to their out-of-memory error.
  if (e == cudaErrorMemoryAllocation) return ResourceExhaustedError(std::move(message));
  return InternalError(std::move(message));
}

// Whether this thread has a CUDA context current (the driver's cuCtxGetCurrent); true when that
// cannot be told. collectives/cuda/device.cc.
bool CudaThreadHasContext();

// Makes `device` current for a scope and restores the previous one (kolo's calls may run on a
// thread whose current device the framework chose). On a thread with no context yet (kolo's
// own threads at first, or a caller's that has not used CUDA) there is nothing to restore, and
// `device` stays current: cudaGetDevice says 0 there, and since CUDA 12 making device 0 current
// creates a context on it, which a rank of another GPU must never have (memory on GPU 0 for
// every rank of a node; EXCLUSIVE_PROCESS mode refuses it).
class CudaDeviceScope {
 public:
  explicit CudaDeviceScope(int device) {
    if (!CudaThreadHasContext() || cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    cudaSetDevice(device);
  }
  ~CudaDeviceScope() {
    if (previous_ >= 0) cudaSetDevice(previous_);
  }
  CudaDeviceScope(const CudaDeviceScope&) = delete;
  CudaDeviceScope& operator=(const CudaDeviceScope&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace kolo

#define KOLO_CUDA_CALL(call)                                        \
  do {                                                              \
    const cudaError_t kolo_cuda_err_ = (call);                      \
    if (kolo_cuda_err_ != cudaSuccess) {                            \
      return ::kolo::CudaError(kolo_cuda_err_, #call);              \
    }                                                               \
  } while (0)

#endif  // KOLO_COLLECTIVES_CUDA_CUDA_CALL_H_
