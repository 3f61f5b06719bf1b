// One kernel for many tensors: the segment table is the kernel's argument; blockIdx.y picks the
// segment, blocks along x stride over its elements. Small tensors cost a few idle blocks, big
// ones get up to kBlocksPerSegment blocks, so one launch covers a ResNet-50-like layout
// (hundreds of tensors from 256 B to MiBs) near copy bandwidth.
#include "fusion/cuda/device_pack.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "collectives/cuda/cuda_call.h"

namespace kolo {

namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSegment = 256;

struct SegmentTable {
  int n;
  DeviceSegment seg[kMaxSegmentsPerLaunch];
};

// Element conversions: load as the compute type, scale, store back.
template <typename T>
struct Scaled {
  // Floating types compute in their own precision.
  __device__ static T Apply(T v, double f) { return static_cast<T>(v * static_cast<T>(f)); }
};
template <>
struct Scaled<__half> {
  __device__ static __half Apply(__half v, double f) {
    return __float2half_rn(__half2float(v) * static_cast<float>(f));
  }
};
template <>
struct Scaled<__nv_bfloat16> {
  __device__ static __nv_bfloat16 Apply(__nv_bfloat16 v, double f) {
    return __float2bfloat16_rn(__bfloat162float(v) * static_cast<float>(f));
  }
};
// Integers: in double, truncated toward zero, saturated; NaN -> 0 (reduce.h's ScaleCopy).
// (std::numeric_limits is host-only code for nvcc, hence the table.)
template <typename I>
struct IntRange;
#define KOLO_INT_RANGE(I, LO, HI)              \
  template <>                                  \
  struct IntRange<I> {                         \
    static constexpr I kMin = LO;              \
    static constexpr I kMax = HI;              \
  };
KOLO_INT_RANGE(uint8_t, 0, UINT8_MAX)
KOLO_INT_RANGE(int8_t, INT8_MIN, INT8_MAX)
KOLO_INT_RANGE(uint16_t, 0, UINT16_MAX)
KOLO_INT_RANGE(int16_t, INT16_MIN, INT16_MAX)
KOLO_INT_RANGE(int32_t, INT32_MIN, INT32_MAX)
KOLO_INT_RANGE(int64_t, INT64_MIN, INT64_MAX)
#undef KOLO_INT_RANGE

template <typename I>
__device__ I ScaleInt(I v, double f) {
  const double x = static_cast<double>(v) * f;
  if (isnan(x)) return 0;
  if (x <= static_cast<double>(IntRange<I>::kMin)) return IntRange<I>::kMin;
  if (x >= static_cast<double>(IntRange<I>::kMax)) return IntRange<I>::kMax;
  return static_cast<I>(trunc(x));
}
#define KOLO_INT_SCALED(I)                                                          \
  template <>                                                                       \
  struct Scaled<I> {                                                                \
    __device__ static I Apply(I v, double f) { return ScaleInt<I>(v, f); }          \
  };
KOLO_INT_SCALED(uint8_t)
KOLO_INT_SCALED(int8_t)
KOLO_INT_SCALED(uint16_t)
KOLO_INT_SCALED(int16_t)
KOLO_INT_SCALED(int32_t)
KOLO_INT_SCALED(int64_t)
#undef KOLO_INT_SCALED

template <typename T, bool kScale>
__global__ void ScaleCopyKernel(SegmentTable table, double factor) {
  const DeviceSegment s = table.seg[blockIdx.y];
  const T* src = static_cast<const T*>(s.src);
  T* dst = static_cast<T*>(s.dst);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < s.count;
       i += stride) {
    dst[i] = kScale ? Scaled<T>::Apply(src[i], factor) : src[i];
  }
}

template <typename T>
Status Launch(const DeviceSegment* segs, int n, double factor, cudaStream_t stream) {
  SegmentTable table;
  table.n = n;
  size_t longest = 0;
  for (int i = 0; i < n; ++i) {
    table.seg[i] = segs[i];
    longest = std::max(longest, segs[i].count);
  }
  if (longest == 0) return Status::OK();
  const size_t wanted = (longest + kThreads - 1) / kThreads;
  const dim3 grid(static_cast<unsigned>(std::min<size_t>(wanted, kBlocksPerSegment)),
                  static_cast<unsigned>(n));
  if (factor == 1.0) {
    ScaleCopyKernel<T, false><<<grid, kThreads, 0, stream>>>(table, factor);
  } else {
    ScaleCopyKernel<T, true><<<grid, kThreads, 0, stream>>>(table, factor);
  }
  KOLO_CUDA_CALL(cudaGetLastError());
  return Status::OK();
}

Status LaunchTyped(DataType dtype, const DeviceSegment* segs, int n, double factor,
                   cudaStream_t stream) {
  switch (dtype) {
    case DataType::kUInt8: return Launch<uint8_t>(segs, n, factor, stream);
    case DataType::kInt8: return Launch<int8_t>(segs, n, factor, stream);
    case DataType::kUInt16: return Launch<uint16_t>(segs, n, factor, stream);
    case DataType::kInt16: return Launch<int16_t>(segs, n, factor, stream);
    case DataType::kInt32: return Launch<int32_t>(segs, n, factor, stream);
    case DataType::kInt64: return Launch<int64_t>(segs, n, factor, stream);
    case DataType::kFloat16: return Launch<__half>(segs, n, factor, stream);
    case DataType::kBFloat16: return Launch<__nv_bfloat16>(segs, n, factor, stream);
    case DataType::kFloat32: return Launch<float>(segs, n, factor, stream);
    case DataType::kFloat64: return Launch<double>(segs, n, factor, stream);
    case DataType::kBool:
      if (factor != 1.0) {
        return InvalidArgumentError("bool tensors cannot be scaled (factor " +
                                    std::to_string(factor) + ")");
      }
      return Launch<uint8_t>(segs, n, 1.0, stream);
  }
  return InvalidArgumentError("unknown dtype " + std::to_string(static_cast<int>(dtype)));
}

}  // namespace

Status BatchedScaleCopy(const std::vector<DeviceSegment>& segments, DataType dtype, double factor,
                        cudaStream_t stream) {
  for (size_t first = 0; first < segments.size(); first += kMaxSegmentsPerLaunch) {
    const int n = static_cast<int>(
        std::min<size_t>(kMaxSegmentsPerLaunch, segments.size() - first));
    KOLO_RETURN_IF_ERROR(LaunchTyped(dtype, segments.data() + first, n, factor, stream));
  }
  return Status::OK();
}

Status PackToFusion(const std::vector<const void*>& tensors, const std::vector<size_t>& counts,
                    const std::vector<size_t>& offsets, void* fused, DataType dtype,
                    double prescale, cudaStream_t stream) {
  if (tensors.size() != counts.size() || tensors.size() != offsets.size()) {
    return InvalidArgumentError("PackToFusion: tensors, counts and offsets differ in length");
  }
  std::vector<DeviceSegment> segs(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    segs[i] = {tensors[i], static_cast<char*>(fused) + offsets[i], counts[i]};
  }
  return BatchedScaleCopy(segs, dtype, prescale, stream);
}

Status UnpackFromFusion(const void* fused, const std::vector<size_t>& offsets,
                        const std::vector<void*>& tensors, const std::vector<size_t>& counts,
                        DataType dtype, double postscale, cudaStream_t stream) {
  if (tensors.size() != counts.size() || tensors.size() != offsets.size()) {
    return InvalidArgumentError("UnpackFromFusion: tensors, counts and offsets differ in length");
  }
  std::vector<DeviceSegment> segs(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    segs[i] = {static_cast<const char*>(fused) + offsets[i], tensors[i], counts[i]};
  }
  return BatchedScaleCopy(segs, dtype, postscale, stream);
}

}  // namespace kolo
