#include "collectives/cuda/device.h"

#include "kolo/config.h"

#include <cstdint>
#include <utility>

#if KOLO_WITH_CUDA
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <atomic>
#include <map>
#include <mutex>

#include "collectives/cuda/cuda_call.h"
#endif

namespace kolo {

bool CudaBuilt() { return KOLO_WITH_CUDA != 0; }

std::string InsufficientDriverReason(int driver_version, int runtime_version) {
  const auto version = [](int v) {
    return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
  };
  // The oldest Linux driver release of each CUDA major version (NVIDIA's CUDA compatibility
  // table: minor version compatibility within a major).
  const int major = runtime_version / 1000;
  const char* release = major >= 13 ? "580" : major == 12 ? "525" : major == 11 ? "450" : "";
  const std::string needs =
      *release != '\0'
          ? std::string(": it needs an NVIDIA driver of release ") + release + " or newer"
          : std::string();
  const std::string runtime =
      "kolo's CUDA runtime is " + version(runtime_version) + ", linked statically" + needs;
  if (driver_version == 0) return "no NVIDIA driver is installed; " + runtime;
  return "the NVIDIA driver supports CUDA up to " + version(driver_version) + ", but " + runtime;
}

#if KOLO_WITH_CUDA
bool CudaThreadHasContext() {
  // CUresult cuCtxGetCurrent(CUcontext*), from the driver the CUDA runtime has loaded (kolo
  // links the runtime statically and not the driver, so it is looked up, not linked).
  using GetCurrent = int (*)(void**);
  static std::atomic<GetCurrent> get{nullptr};
  GetCurrent f = get.load(std::memory_order_acquire);
  if (f == nullptr) {
    void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (driver != nullptr) f = reinterpret_cast<GetCurrent>(dlsym(driver, "cuCtxGetCurrent"));
    if (f == nullptr) return true;  // cannot tell: restore, as a scope always did
    get.store(f, std::memory_order_release);
  }
  void* context = nullptr;
  return f(&context) == 0 && context != nullptr;
}
#endif

void* ReadyStreamOrLegacy(void* stream) {
  // cudaStreamLegacy's value, which builds without CUDA's headers cannot name.
  return stream != nullptr ? stream : reinterpret_cast<void*>(uintptr_t{0x1});
}

#if KOLO_WITH_CUDA

namespace {

struct DeviceCount {
  int devices = 0;
  std::string reason;  // why none
};

// Asked once per process: the answer does not change, and every submission asks.
const DeviceCount& Counted() {
  static const DeviceCount counted = [] {
    DeviceCount c;
    const cudaError_t e = cudaGetDeviceCount(&c.devices);
    if (e == cudaSuccess) {
      if (c.devices == 0) c.reason = "no CUDA device";
      return c;
    }
    c.devices = 0;
    // Clears the sticky "last error" so later CUDA calls do not report this one.
    cudaGetLastError();
    c.reason = cudaGetErrorString(e);
    int driver = 0, runtime = 0;
    if (e == cudaErrorInsufficientDriver && cudaDriverGetVersion(&driver) == cudaSuccess &&
        cudaRuntimeGetVersion(&runtime) == cudaSuccess) {
      c.reason = InsufficientDriverReason(driver, runtime) + " (" + c.reason + ")";
    }
    return c;
  }();
  return counted;
}

}  // namespace

int CudaDeviceCount(std::string* reason) {
  const DeviceCount& c = Counted();
  if (reason && c.devices == 0) *reason = c.reason;
  return c.devices;
}

std::string CudaDriverTooOld() {
  // Neither call initialises the driver (so a CPU-only job that forks later is unaffected).
  int driver = 0, runtime = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess ||
      cudaRuntimeGetVersion(&runtime) != cudaSuccess) {
    return "";
  }
  // Within a major version the runtime runs on an older driver (minor version compatibility).
  if (driver == 0 || driver / 1000 >= runtime / 1000) return "";
  return InsufficientDriverReason(driver, runtime);
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
  void* p = nullptr;
  cudaError_t e;
  {
    CudaDeviceScope scope(device);
    e = cudaMalloc(&p, bytes ? bytes : 1);
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    return ResourceExhaustedError("cudaMalloc of " + std::to_string(bytes) + " bytes on cuda:" +
                                  std::to_string(device) + " failed: " + cudaGetErrorString(e));
  }
  return p;
}

void FreeDeviceMemory(int device, void* p) {
  if (p == nullptr) return;
  CudaDeviceScope scope(device);
  cudaFree(p);
}

namespace {

// What kolo's pool keeps of the memory given back (device.h, AllocateOnStream).
constexpr uint64_t kKoloPoolKeepsBytes = uint64_t{1} << 30;

// kolo's pool of `device` (device.h, AllocateOnStream), made on first use and kept for the
// process; nullptr with *error set when CUDA refuses.
cudaMemPool_t KoloPool(int device, cudaError_t* error) {
  static std::mutex mu;
  static auto* pools = new std::map<int, cudaMemPool_t>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = pools->find(device);
  if (it != pools->end()) return it->second;
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool = nullptr;
  *error = cudaMemPoolCreate(&pool, &props);
  if (*error != cudaSuccess) return nullptr;
  uint64_t keep = kKoloPoolKeepsBytes;
  cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
  pools->emplace(device, pool);
  return pool;
}

}  // namespace

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
  void* p = nullptr;
  cudaError_t e = cudaSuccess;
  {
    CudaDeviceScope scope(device);
    cudaMemPool_t pool = KoloPool(device, &e);
    if (pool != nullptr) {
      const auto s = static_cast<cudaStream_t>(stream);
      e = cudaMallocFromPoolAsync(&p, bytes ? bytes : 1, pool, s);
      if (e == cudaErrorMemoryAllocation) {
        // What the pool keeps may be what the device lacks: give it back and try once more.
        cudaGetLastError();
        cudaMemPoolTrimTo(pool, 0);
        e = cudaMallocFromPoolAsync(&p, bytes ? bytes : 1, pool, s);
      }
    }
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    return ResourceExhaustedError("cudaMallocFromPoolAsync of " + std::to_string(bytes) +
                                  " bytes on cuda:" + std::to_string(device) +
                                  " failed: " + cudaGetErrorString(e));
  }
  return p;
}

void FreeOnStream(int device, void* stream, void* p) {
  if (p == nullptr) return;
  CudaDeviceScope scope(device);
  if (cudaFreeAsync(p, static_cast<cudaStream_t>(stream)) != cudaSuccess) {
    // The stream is gone (destroyed by its owner) or broken: free after the device instead
    // of leaking.
    cudaGetLastError();
    cudaDeviceSynchronize();
    cudaFree(p);
  }
}

void FreeStreamOrderedMemory(int device, void* p) {
  if (p == nullptr) return;
  CudaDeviceScope scope(device);
  cudaDeviceSynchronize();
  cudaFree(p);
}

StatusOr<void*> RecordReadyEvent(int device, void* stream) {
  if (CudaDeviceCount() <= device) return static_cast<void*>(nullptr);
  CudaDeviceScope scope(device);
  cudaEvent_t ev = nullptr;
  KOLO_CUDA_CALL(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  const cudaError_t e = cudaEventRecord(ev, static_cast<cudaStream_t>(ReadyStreamOrLegacy(stream)));
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

std::string CudaDriverTooOld() { return ""; }

PointerKind ClassifyPointer(const void*) { return PointerKind(); }

#endif

}  // namespace kolo
