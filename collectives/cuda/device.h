// Where a buffer lives, and whether this process can use a GPU at all. Every call here fails
// softly: on a machine without a GPU or driver, or in a build without CUDA, there are no
// devices and every pointer is host memory, so the CPU paths never depend on CUDA. No CUDA
// call is made before one of these functions is.
#ifndef KOLO_COLLECTIVES_CUDA_DEVICE_H_
#define KOLO_COLLECTIVES_CUDA_DEVICE_H_

#include <string>

#include "base/status.h"
#include "collectives/algorithm.h"

namespace kolo {

// Whether this build has the CUDA path (KOLO_WITH_CUDA).
bool CudaBuilt();

// GPUs this process can use; 0 without a driver or device (why: *reason, when given; a driver
// too old for kolo's CUDA runtime is named with both versions: InsufficientDriverReason).
int CudaDeviceCount(std::string* reason = nullptr);

// InsufficientDriverReason when this machine has an NVIDIA driver too old for kolo's CUDA
// runtime (a GPU machine that needs a newer driver), else "" (no driver at all is the ordinary
// CPU-only machine, not worth a word).
std::string CudaDriverTooOld();

// Why a driver of CUDA version `driver_version` cannot run kolo's CUDA runtime of
// `runtime_version` (both as CUDA encodes them: 1000 major + 10 minor; 0: no driver), naming
// the driver release the runtime needs: the runtime is linked statically, so only the driver
// can change.
std::string InsufficientDriverReason(int driver_version, int runtime_version);

// The stream a CUDA tensor's writes are ordered on: `stream`, or when the caller names none
// CUDA's legacy default stream (handle 0 as CUDA and torch mean it: torch's current stream
// unless a script picks another, and one every blocking stream synchronizes with). kolo's own
// streams are non-blocking, so they would not wait for it without an event.
void* ReadyStreamOrLegacy(void* stream);

struct PointerKind {
  MemoryKind memory = MemoryKind::kHost;
  int device = -1;  // the CUDA device of device (and managed) memory
};

// Host for ordinary and pinned host memory and whenever there is no device; kCuda with the
// device ordinal for device and managed memory (cudaPointerGetAttributes).
PointerKind ClassifyPointer(const void* p);

// `bytes` (at least 1) of memory on CUDA device `device` (cudaMalloc there); kResourceExhausted
// naming the bytes and CUDA's reason when it fails, kFailedPrecondition without such a device.
StatusOr<void*> AllocateDeviceMemory(int device, size_t bytes);
// Frees memory from AllocateDeviceMemory (cudaFree, with `device` current: safe from any
// thread). A no-op for nullptr. cudaFree waits for the device's work using the memory.
void FreeDeviceMemory(int device, void* p);

// A CUDA event recorded on ReadyStreamOrLegacy(stream) (a cudaStream_t of `device`): the
// framework's stream's readiness at submission, so kolo's stream can wait for what the
// framework's kernels wrote without synchronizing the host. nullptr when this process has no
// such device (the execution then fails saying so), and in a build without CUDA when no stream
// is given; kUnimplemented for a stream given to a build without CUDA.
StatusOr<void*> RecordReadyEvent(int device, void* stream);
// Frees an event from RecordReadyEvent (after its wait was enqueued, or unconsumed: a refused
// submission). A no-op for nullptr.
void DestroyReadyEvent(void* event);

// Memory for kolo's own streams, from CUDA's stream-ordered allocator (cudaMallocFromPoolAsync
// from kolo's own pool of the device, so the process's default pool keeps its settings), which
// neither allocation nor release synchronizes. The pool keeps up to 1 GiB of what is given
// back for the next allocations (its release threshold: with CUDA's default of 0 every
// synchronization would return the memory to the driver, and the next step's outputs would be
// mapped afresh), and returns the rest at the next synchronization, so its peak (one large
// all-gather) does not stay away from the framework's allocator; when an allocation finds the
// device full, the pool's unused memory goes back to the driver and the allocation is tried
// once more. `bytes` (at least 1) on `device`, usable by
// work enqueued on `stream` (a cudaStream_t of that device) after this call, and by anything else
// once the host has seen such work finish. kUnimplemented where the device has no stream-ordered
// allocator (cudaDevAttrMemoryPoolsSupported is 0: some virtualised GPUs), so the caller can fall
// back to AllocateDeviceMemory; kResourceExhausted as AllocateDeviceMemory.
StatusOr<void*> AllocateOnStream(int device, void* stream, size_t bytes);
// Gives memory from AllocateOnStream back once `stream` gets there (cudaFreeAsync): for memory
// whose every use so far was enqueued on `stream` or has finished. Never waits, unless CUDA
// refuses the stream (destroyed meanwhile): then it frees after the device's work. Any thread.
void FreeOnStream(int device, void* stream, void* p);
// Frees memory from AllocateOnStream whose last uses kolo cannot see and no stream orders:
// waits for the device first (cudaDeviceSynchronize), as cudaFree does implicitly for
// cudaMalloc'd memory but not for stream-ordered memory (CUDA's cudaFree documentation). Only
// a fallback: an output handed to a framework is freed on the framework's stream (BufferFree,
// runtime/handle.h). A no-op for nullptr.
void FreeStreamOrderedMemory(int device, void* p);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_CUDA_DEVICE_H_
