// join with CUDA tensors: the joined rank's part in a device all-reduce (operations.h,
// DeviceJoinedAllreduceJob). As on the host (join.cc), every tensor of the Response is in the
// job in the same order as on the submitters; those this rank never submitted are identity
// buffers, here in memory of this rank's device, since NCCL reduces device buffers only.
// Allocated per Response (join is rare; nothing is kept), freed by the scratch after the run.
#include <string>

#include "collectives/cuda/device.h"
#include "kolo/config.h"
#include "runtime/operations.h"

#if KOLO_WITH_CUDA && KOLO_WITH_NCCL
#include "collectives/cuda/cuda_call.h"
#include "fusion/cuda/device_pack.h"
#include "runtime/device/device_stream.h"
#endif

namespace kolo {

#if KOLO_WITH_CUDA && KOLO_WITH_NCCL

Status DeviceJoinedAllreduceJob(const Communicator& comm, const Response& response,
                                const std::vector<TensorEntry>& entries, int device,
                                std::vector<void*>* ready_events, AllreduceJob* job,
                                JoinedScratch* scratch) {
  const std::string what = "allreduce '" + response.names[0] + "' (this rank has joined)";
  // Every event is consumed, whatever fails.
  cudaStream_t stream = nullptr;
  Status waited;
  for (void*& ev : *ready_events) {
    if (waited.ok()) {
      auto s = StreamAfterReadyEvent(comm, device, ev);
      if (s.ok()) {
        stream = *s;
      } else {
        waited = s.status();
      }
    } else {
      DestroyReadyEvent(ev);
    }
    ev = nullptr;
  }
  KOLO_RETURN_IF_ERROR(waited.AddContext(what));
  if (stream == nullptr) {
    KOLO_ASSIGN_OR_RETURN(stream, StreamAfterReadyEvent(comm, device, nullptr));
  }
  if (response.counts.size() != entries.size()) {
    return InternalError(what + ": the Response has " + std::to_string(response.counts.size()) +
                         " counts for " + std::to_string(entries.size()) + " tensors");
  }
  CudaDeviceScope scope(device);
  // Zeros are the identity after any prescale; the other identities are not.
  const bool sum = job->op == ReduceOp::kSum || job->op == ReduceOp::kAverage;
  const double prescale = job->prescale;
  if (!sum) job->prescale = 1.0;
  const size_t es = DataTypeSize(response.dtype);
  auto device_buffer = [&](size_t count) -> StatusOr<void*> {
    KOLO_ASSIGN_OR_RETURN(void* p, AllocateDeviceMemory(device, count * es));
    scratch->buffers.emplace_back(p, OutputBuffer::Free{device});
    return p;
  };
  for (size_t i = 0; i < entries.size(); ++i) {
    const size_t count = static_cast<size_t>(response.counts[i]);
    const TensorEntry& e = entries[i];
    if (!e.handle) {
      KOLO_ASSIGN_OR_RETURN(void* buf, device_buffer(count));
      if (sum) {
        KOLO_CUDA_CALL(cudaMemsetAsync(buf, 0, count * es, stream));
      } else if (count > 0) {
        // Filled on the host (the same FillIdentity as join.cc), kept until the job has run.
        scratch->buffers.emplace_back(std::malloc(count * es));
        void* host = scratch->buffers.back().get();
        if (!host) {
          return ResourceExhaustedError(what + ": cannot allocate " + std::to_string(count * es) +
                                        " bytes for the identity");
        }
        FillIdentity(host, count, response.dtype, response.reduce_op);
        KOLO_CUDA_CALL(cudaMemcpyAsync(buf, host, count * es, cudaMemcpyHostToDevice, stream));
      }
      job->tensors.push_back(FusedTensor{buf, buf, count});
      continue;
    }
    KOLO_RETURN_IF_ERROR(CheckElementCount(what, e, count));
    const void* input = e.input;
    if (!sum && prescale != 1.0 && count) {
      KOLO_ASSIGN_OR_RETURN(void* buf, device_buffer(count));
      KOLO_RETURN_IF_ERROR(BatchedScaleCopy({{e.input, buf, count}}, response.dtype, prescale,
                                            stream)
                               .AddContext("prescaling '" + e.request.name + "'"));
      input = buf;
    }
    job->tensors.push_back(FusedTensor{input, e.output, count});
  }
  return Status::OK();
}

#else

Status DeviceJoinedAllreduceJob(const Communicator&, const Response&,
                                const std::vector<TensorEntry>&, int device,
                                std::vector<void*>* ready_events, AllreduceJob*, JoinedScratch*) {
  for (void*& ev : *ready_events) {
    DestroyReadyEvent(ev);
    ev = nullptr;
  }
  return UnimplementedError("tensors on cuda:" + std::to_string(device) +
                            ", but kolo was built without CUDA and NCCL");
}

#endif

}  // namespace kolo
