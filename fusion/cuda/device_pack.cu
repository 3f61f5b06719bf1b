// One kernel for many tensors: the segment table is the kernel's argument, and the blocks
// stride over the tiles of all segments together (a tile: kTileBytes of one segment), so the
// grid is sized by the total, not by the longest tensor, and a launch of hundreds of small
// tensors (a ResNet-50-like layout, 256 B to MiBs) keeps every block busy. Within a tile each
// thread moves 16 bytes per load and store (one uint4) when both sides are 16-byte aligned, as
// the fusion buffer's slots and framework allocations are, and one element at a time otherwise.
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
// 16 KiB per tile: 4 uint4 per thread, enough to hide a load's latency, small enough that a
// 256-byte tensor costs one mostly idle tile and nothing more.
constexpr size_t kTileBytes = 16384;
// A few waves of blocks on the largest GPUs (132 SMs x 8 blocks of 256 threads); more would
// only queue.
constexpr size_t kMaxBlocks = 1024;

struct SegmentTable {
  int n;
  DeviceSegment seg[kMaxSegmentsPerLaunch];
  // first_tile[i]: tiles of the segments before i; first_tile[n] is the launch's total (32
  // bits, so the table stays under the parameter limit: 2^32 tiles are 64 TiB).
  uint32_t first_tile[kMaxSegmentsPerLaunch + 1];
};
static_assert(sizeof(SegmentTable) + sizeof(double) <= 4096,
              "the kernel's arguments must stay under CUDA's 4 KiB parameter limit");

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
__device__ __forceinline__ T Convert(T v, double factor) {
  return kScale ? Scaled<T>::Apply(v, factor) : v;
}

// The segment of tile t: the last i with first_tile[i] <= t (a binary search over at most
// kMaxSegmentsPerLaunch entries, the same for every thread of the block).
__device__ __forceinline__ int SegmentOf(const SegmentTable& table, uint32_t t) {
  int lo = 0, hi = table.n - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (table.first_tile[mid] <= t) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

template <typename T, bool kScale>
__global__ void __launch_bounds__(kThreads)
    ScaleCopyKernel(const SegmentTable table, double factor) {
  constexpr size_t kTile = kTileBytes / sizeof(T);    // elements per tile
  constexpr size_t kVec = sizeof(uint4) / sizeof(T);  // elements per 16-byte load
  const uint32_t tiles = table.first_tile[table.n];
  for (uint32_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int i = SegmentOf(table, t);
    const DeviceSegment& s = table.seg[i];
    const size_t begin = static_cast<size_t>(t - table.first_tile[i]) * kTile;
    const size_t n = s.count - begin < kTile ? s.count - begin : kTile;
    const T* __restrict__ src = static_cast<const T*>(s.src) + begin;
    T* __restrict__ dst = static_cast<T*>(s.dst) + begin;
    size_t done = 0;
    if (((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) & 15) == 0) {
      const uint4* __restrict__ vsrc = reinterpret_cast<const uint4*>(src);
      uint4* __restrict__ vdst = reinterpret_cast<uint4*>(dst);
      const size_t vecs = n / kVec;
      for (size_t v = threadIdx.x; v < vecs; v += blockDim.x) {
        uint4 word = vsrc[v];
        if (kScale) {
          T* e = reinterpret_cast<T*>(&word);
#pragma unroll
          for (size_t k = 0; k < kVec; ++k) e[k] = Convert<T, kScale>(e[k], factor);
        }
        vdst[v] = word;
      }
      done = vecs * kVec;
    }
    for (size_t k = done + threadIdx.x; k < n; k += blockDim.x) {
      dst[k] = Convert<T, kScale>(src[k], factor);
    }
  }
}

template <typename T>
Status Launch(const DeviceSegment* segs, int n, double factor, cudaStream_t stream) {
  constexpr size_t kTile = kTileBytes / sizeof(T);
  SegmentTable table;
  table.n = n;
  size_t tiles = 0;
  for (int i = 0; i < n; ++i) {
    table.seg[i] = segs[i];
    table.first_tile[i] = static_cast<uint32_t>(tiles);
    tiles += (segs[i].count + kTile - 1) / kTile;
    if (tiles > UINT32_MAX) {
      return InvalidArgumentError("a pack or unpack of over 64 TiB in one launch");
    }
  }
  table.first_tile[n] = static_cast<uint32_t>(tiles);
  if (tiles == 0) return Status::OK();
  const dim3 grid(static_cast<unsigned>(std::min(tiles, kMaxBlocks)));
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
