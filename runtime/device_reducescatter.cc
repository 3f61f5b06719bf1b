// Reducescatter of a CUDA tensor (device_ops.h). On kolo's stream, after the ready event:
//
//   parts equal, prescale 1   ncclReduceScatter straight from the input into the output
//   otherwise                 one batched copy (prescale fused) of each rank's part into its
//                             slot of the staging buffer (padding zeroed when parts are
//                             unequal: nccl_plan.h), then ncclReduceScatter from there
//   then                      postscale (Average folded in: postscale / size) in place
//
// The output holds a whole padded slot (what NCCL writes); the shape counts this rank's rows.
// The staging buffer is kept per device and grown when needed (first touch is not free).
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "kolo/config.h"
#include "runtime/device_ops.h"

#if KOLO_WITH_CUDA && KOLO_WITH_NCCL
#include "collectives/nccl/nccl_collectives.h"
#include "collectives/nccl/nccl_plan.h"
#include "fusion/cuda/device_pack.h"
#include "runtime/device_stream.h"
#else
#include "runtime/device_allreduce.h"
#endif

namespace kolo {

std::string DeviceReductionRefusal(DataType dtype, ReduceOp op) {
  if (dtype == DataType::kInt16 || dtype == DataType::kUInt16 || dtype == DataType::kBool) {
    return "NCCL has no " + std::string(DataTypeName(dtype)) +
           " reduction, so CUDA tensors of it cannot be reduced (convert to int32, or reduce "
           "on the host)";
  }
  if (op == ReduceOp::kAverage && !IsFloatingPoint(dtype)) {
    return "Average of integer CUDA tensors is not supported (use Sum)";
  }
  return "";
}

#if KOLO_WITH_CUDA && KOLO_WITH_NCCL

namespace {

// The staging buffer of `device`, at least `bytes` long; the lock is held while it is used.
StatusOr<void*> Staging(int device, size_t bytes) {
  static auto* buffers = new std::map<int, std::pair<void*, size_t>>();
  auto& [buf, size] = (*buffers)[device];
  if (size < bytes) {
    FreeDeviceMemory(device, buf);
    buf = nullptr;
    size = 0;
    KOLO_ASSIGN_OR_RETURN(buf, AllocateDeviceMemory(device, bytes));
    size = bytes;
  }
  return buf;
}

std::mutex g_staging_mu;

}  // namespace

StatusOr<OutputBuffer> DeviceReducescatter(Communicator& comm, int device, const void* input,
                                           const std::vector<size_t>& counts, DataType dtype,
                                           ReduceOp op, double prescale, double postscale,
                                           void* ready_event) {
  if (std::string why = DeviceReductionRefusal(dtype, op); !why.empty()) {
    DestroyReadyEvent(ready_event);
    return InvalidArgumentError(why);
  }
  if (op != ReduceOp::kSum && op != ReduceOp::kAverage) {
    DestroyReadyEvent(ready_event);
    return InvalidArgumentError("reducescatter takes Sum or Average only");
  }
  const int size = comm.Size(), rank = comm.Rank();
  if (counts.size() != static_cast<size_t>(size)) {
    DestroyReadyEvent(ready_event);
    return InternalError(std::to_string(counts.size()) + " parts for " + std::to_string(size) +
                         " ranks");
  }
  KOLO_ASSIGN_OR_RETURN(cudaStream_t stream, StreamAfterReadyEvent(device, ready_event));
  CudaDeviceScope scope(device);
  const ReducescatterPlan plan = PlanReducescatter(counts);
  const size_t es = DataTypeSize(dtype);
  KOLO_ASSIGN_OR_RETURN(OutputBuffer out, DeviceOutput(device, plan.padded * es));

  std::lock_guard<std::mutex> lock(g_staging_mu);
  const void* send = input;
  if (plan.staged || prescale != 1.0) {
    const size_t staged_bytes = static_cast<size_t>(size) * plan.padded * es;
    KOLO_ASSIGN_OR_RETURN(void* staging, Staging(device, staged_bytes));
    if (plan.staged) {
      // The padding is reduced too (and dropped): zeros keep it from reading stale memory.
      KOLO_CUDA_CALL(cudaMemsetAsync(staging, 0, staged_bytes, stream));
    }
    std::vector<DeviceSegment> parts;
    for (int r = 0; r < size; ++r) {
      parts.push_back({static_cast<const char*>(input) + plan.offsets[r] * es,
                       static_cast<char*>(staging) + plan.Slot(r) * es, counts[r]});
    }
    KOLO_RETURN_IF_ERROR(BatchedScaleCopy(parts, dtype, prescale, stream)
                             .AddContext("staging the parts for ncclReduceScatter"));
    send = staging;
  }
  KOLO_RETURN_IF_ERROR(EnqueueNcclReduceScatter(comm, device, send, out.data.get(), plan.padded,
                                                dtype, ReduceOp::kSum));
  const double post = op == ReduceOp::kAverage ? postscale / size : postscale;
  if (post != 1.0 && counts[rank] > 0) {
    void* mine = out.data.get();
    KOLO_RETURN_IF_ERROR(BatchedScaleCopy({{mine, mine, counts[rank]}}, dtype, post, stream)
                             .AddContext("postscale"));
  }
  KOLO_RETURN_IF_ERROR(WaitForNccl(comm, device, stream, "NCCL reduce-scatter"));
  return out;
}

#else

StatusOr<OutputBuffer> DeviceReducescatter(Communicator&, int device, const void*,
                                           const std::vector<size_t>&, DataType, ReduceOp,
                                           double, double, void* ready_event) {
  DestroyReadyEvent(ready_event);
  return UnimplementedError("tensor on cuda:" + std::to_string(device) +
                            ", but kolo was built without CUDA and NCCL");
}

#endif

}  // namespace kolo
