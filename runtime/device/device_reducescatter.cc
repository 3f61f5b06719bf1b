// Reducescatter of a CUDA tensor (device_ops.h). Enqueued on kolo's stream, after the ready
// event, and not waited for:
//
//   parts equal, prescale 1   ncclReduceScatter straight from the input into the output
//   otherwise                 one batched copy (prescale fused) of each rank's part into its
//                             slot of the staging buffer (padding zeroed when parts are
//                             unequal: nccl_plan.h), then ncclReduceScatter from there
//   then                      postscale (Average folded in: postscale / size) in place
//
// The output holds a whole padded slot (what NCCL writes); the shape counts this rank's rows.
// The staging buffer is taken per call in kolo's stream's order and given back in it right
// after the reduce-scatter is enqueued (device_ops.h, "Memory"): the device's pool hands it to
// the next call on the stream without a cudaMalloc (it may return it to the system at a
// synchronization, by the pool's release threshold, which kolo leaves as the application set
// it), and no buffer is shared between Responses that the host would have to wait for before
// growing it.
#include <memory>
#include <string>
#include <utility>

#include "collectives/cuda/device.h"
#include "collectives/nccl/nccl_supports.h"
#include "collectives/reduce.h"
#include "kolo/config.h"
#include "runtime/device/device_ops.h"

#if KOLO_WITH_CUDA && KOLO_WITH_NCCL
#include "collectives/nccl/nccl_plan.h"
#include "fusion/cuda/device_pack.h"
#include "runtime/device/device_stream.h"
#endif

namespace kolo {

std::string DeviceReductionRefusal(DataType dtype, ReduceOp op) {
  if (op == ReduceOp::kAdasum) {
    return "Adasum of CUDA tensors is not supported (kolo's Adasum runs on host tensors: copy "
           "the tensor to the CPU)";
  }
  if (!NcclHasDtype(dtype)) {
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

// The enqueues of DeviceReducescatter once its arguments are checked. The staging copy, when
// one is needed, goes to *staging, which the caller releases after the last enqueue.
Status EnqueueReducescatter(Communicator& comm, const ReduceScatterEntry& entry, int device,
                            cudaStream_t stream, const void* input,
                            const std::vector<size_t>& counts, DataType dtype, ReduceOp op,
                            double prescale, double postscale, DeviceOpResult* result,
                            std::unique_ptr<void, BufferFree>* staging) {
  const int size = comm.Size(), rank = comm.Rank();
  CudaDeviceScope scope(device);
  const ReducescatterPlan plan = PlanReducescatter(counts);
  const size_t es = DataTypeSize(dtype);
  KOLO_ASSIGN_OR_RETURN(result->output.data,
                        AllocateForKoloStream(device, stream, plan.padded * es));
  const void* send = input;
  if (plan.staged || prescale != 1.0) {
    const size_t staged_bytes = static_cast<size_t>(size) * plan.padded * es;
    KOLO_ASSIGN_OR_RETURN(*staging, AllocateForKoloStream(device, stream, staged_bytes));
    void* staged = staging->get();
    if (plan.staged) {
      // The padding is reduced too (and dropped): zeros keep it from reading stale memory.
      KOLO_CUDA_CALL(cudaMemsetAsync(staged, 0, staged_bytes, stream));
    }
    std::vector<DeviceSegment> parts;
    for (int r = 0; r < size; ++r) {
      parts.push_back({static_cast<const char*>(input) + plan.offsets[r] * es,
                       static_cast<char*>(staged) + plan.Slot(r) * es, counts[r]});
    }
    KOLO_RETURN_IF_ERROR(BatchedScaleCopy(parts, dtype, prescale, stream)
                             .AddContext("staging the parts for ncclReduceScatter"));
    send = staged;
  }
  KOLO_RETURN_IF_ERROR(entry
                           .enqueue(comm, device, send, result->output.data.get(), plan.padded,
                                    dtype, ReduceOp::kSum)
                           .AddContext(std::string(entry.name) + " reduce-scatter"));
  // Integer Average was refused before (DeviceReductionRefusal): the float scale is all.
  const double post = LowerReduce(op, postscale, size).float_postscale;
  if (post != 1.0 && counts[rank] > 0) {
    void* mine = result->output.data.get();
    KOLO_RETURN_IF_ERROR(BatchedScaleCopy({{mine, mine, counts[rank]}}, dtype, post, stream)
                             .AddContext("postscale"));
  }
  return Status::OK();
}

}  // namespace

Status DeviceReducescatter(Communicator& comm, const CollectiveChoice& choice, int device,
                           const void* input, const std::vector<size_t>& counts, DataType dtype,
                           ReduceOp op, double prescale, double postscale, void* ready_event,
                           DeviceOpResult* result) {
  if (std::string why = DeviceReductionRefusal(dtype, op); !why.empty()) {
    DestroyReadyEvent(ready_event);
    return InvalidArgumentError(why);
  }
  if (op != ReduceOp::kSum && op != ReduceOp::kAverage) {
    DestroyReadyEvent(ready_event);
    return InvalidArgumentError("reducescatter takes Sum or Average only");
  }
  if (counts.size() != static_cast<size_t>(comm.Size())) {
    DestroyReadyEvent(ready_event);
    return InternalError(std::to_string(counts.size()) + " parts for " +
                         std::to_string(comm.Size()) + " ranks");
  }
  KOLO_ASSIGN_OR_RETURN(cudaStream_t stream, StreamAfterReadyEvent(comm, device, ready_event));
  // Average goes on the wire as Sum, its division folded into the postscale.
  CollectiveInput in;
  in.memory = MemoryKind::kCuda;
  in.dtype = dtype;
  in.op = ReduceOp::kSum;
  KOLO_ASSIGN_OR_RETURN(const ReduceScatterEntry* entry, choice.PickReduceScatter(in));
  std::unique_ptr<void, BufferFree> staging;
  Status enqueued = EnqueueReducescatter(comm, *entry, device, stream, input, counts, dtype, op,
                                         prescale, postscale, result, &staging);
  // Past the last enqueue that reads the staging copy, whatever failed: memory taken in the
  // stream's order goes back in it now (the stream keeps it until the reduce-scatter has read
  // it); cudaMalloc'd staging stays with the result until the work is done (device_ops.h).
  if (staging && staging.get_deleter().stream_ordered) {
    ReleaseAfterKoloStream(comm, device, std::move(staging));
  } else {
    result->staging = std::move(staging);
  }
  return enqueued;
}

#else

Status DeviceReducescatter(Communicator&, const CollectiveChoice&, int device, const void*,
                           const std::vector<size_t>&, DataType, ReduceOp, double, double,
                           void* ready_event, DeviceOpResult*) {
  DestroyReadyEvent(ready_event);
  return UnimplementedError("tensor on cuda:" + std::to_string(device) +
                            ", but kolo was built without CUDA and NCCL");
}

#endif

}  // namespace kolo
