// Fusion on the device: copying many tensors into (pack) or out of (unpack) a fusion buffer in
// GPU memory with one kernel launch per up to kMaxSegmentsPerLaunch tensors, instead of one
// cudaMemcpyAsync each, with the prescale/postscale factor applied on the way (Horovod's
// prescale_factor / postscale_factor; Average's division folds into the postscale).
//
// Semantics are collectives/reduce.h's ScaleCopy, element for element, so the host kernel is
// the reference: float32 and float64 scale in their own precision, float16 and bfloat16 in
// float32 (rounded once, to nearest even), integers in double truncated toward zero and
// saturated to the dtype's range (NaN -> 0), bool only with factor 1.
//
// Shapes and units: `count` is elements of `dtype`; src and dst are device pointers of one
// device (the stream's), aligned to the element size, not overlapping.
#ifndef KOLO_FUSION_CUDA_DEVICE_PACK_H_
#define KOLO_FUSION_CUDA_DEVICE_PACK_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"

namespace kolo {

struct DeviceSegment {
  const void* src = nullptr;
  void* dst = nullptr;
  size_t count = 0;
};

// Segments per launch: the table (28 bytes per segment) travels as the
// kernel's argument, under the 4 KiB parameter limit of every CUDA version kolo builds for.
inline constexpr int kMaxSegmentsPerLaunch = 128;

// dst = src * factor for every segment, enqueued on `stream` (asynchronous; completion is the
// stream's). kInvalidArgument for bool with factor != 1 or an unknown dtype; kInternal with
// CUDA's error string if a launch fails.
Status BatchedScaleCopy(const std::vector<DeviceSegment>& segments, DataType dtype, double factor,
                        cudaStream_t stream);

// The two directions of the fusion buffer, named for the caller's benefit: each tensor i goes
// to/from `fused + offsets[i]` (bytes).
Status PackToFusion(const std::vector<const void*>& tensors, const std::vector<size_t>& counts,
                    const std::vector<size_t>& offsets, void* fused, DataType dtype,
                    double prescale, cudaStream_t stream);
Status UnpackFromFusion(const void* fused, const std::vector<size_t>& offsets,
                        const std::vector<void*>& tensors, const std::vector<size_t>& counts,
                        DataType dtype, double postscale, cudaStream_t stream);

}  // namespace kolo

#endif  // KOLO_FUSION_CUDA_DEVICE_PACK_H_
