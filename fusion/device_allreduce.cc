#include "fusion/device_allreduce.h"

#include <string>

#include "collectives/cuda/device.h"
#include "collectives/reduce.h"
#include "kolo/config.h"

#if KOLO_WITH_CUDA
#include "collectives/cuda/cuda_call.h"
#include "fusion/cuda/device_pack.h"
#endif
#if KOLO_WITH_NCCL
#include "collectives/nccl/nccl_comm.h"
#endif

namespace kolo {

#if KOLO_WITH_CUDA && KOLO_WITH_NCCL

DeviceAllreduce::~DeviceAllreduce() {
  for (auto& [device, buf] : buffers_) {
    if (buf.first != nullptr) {
      CudaDeviceScope scope(device);
      cudaFree(buf.first);
    }
  }
}

Status DeviceAllreduce::Run(Communicator& comm, const AllreduceSelector& selector, int device,
                            const AllreduceJob& job, const std::vector<void*>& ready_events) {
  std::string why;
  if (CudaDeviceCount(&why) <= device) {
    for (void* ev : ready_events) DestroyReadyEvent(ev);
    return FailedPreconditionError("tensors on cuda:" + std::to_string(device) +
                                   ", but this process has no such CUDA device (" + why + ")");
  }
  CudaDeviceScope scope(device);
  KOLO_ASSIGN_OR_RETURN(cudaStream_t stream, KoloStream(comm, device));
  Status waited;
  for (void* ev : ready_events) {
    if (ev == nullptr) continue;
    const cudaError_t e = cudaStreamWaitEvent(stream, static_cast<cudaEvent_t>(ev), 0);
    if (e != cudaSuccess && waited.ok()) waited = CudaError(e, "cudaStreamWaitEvent");
    DestroyReadyEvent(ev);
  }
  KOLO_RETURN_IF_ERROR(waited);

  if (job.op == ReduceOp::kAverage && !IsFloatingPoint(job.dtype)) {
    return UnimplementedError("Average of integer CUDA tensors is not supported (use Sum)");
  }
  const LoweredReduce lowered = LowerReduce(job.op, job.postscale, comm.Size());
  const ReduceOp op = lowered.wire_op;
  const double postscale = lowered.float_postscale;
  size_t total = 0;
  for (const FusedTensor& t : job.tensors) total += t.count;
  if (total == 0) return Status::OK();
  const size_t es = DataTypeSize(job.dtype);

  SelectionInput in = DescribeCommunicator(comm);
  in.memory = MemoryKind::kCuda;
  in.dtype = job.dtype;
  in.count = total;
  in.bytes = total * es;
  in.op = op;
  KOLO_ASSIGN_OR_RETURN(AllreduceAlgorithm * algo, selector.Select(in));
  // A stream-ordered algorithm (one ncclAllReduce) is only enqueued; the others (hierarchical)
  // wait inside, on this thread.
  auto* ordered = dynamic_cast<StreamOrderedAllreduce*>(algo);

  const void* send = nullptr;
  void* data = nullptr;
  std::vector<DeviceSegment> pack, unpack;
  const bool direct = job.tensors.size() == 1 && job.prescale == 1.0;
  // One tensor through NCCL: out of place (NCCL reads the input and writes the output, no copy
  // first), with the postscale (Average's 1/size) in the reduction where NCCL can fold it, so
  // the result is written once.
  bool folded = false;
  if (direct) {
    const FusedTensor& t = job.tensors[0];
    data = t.output;
    send = t.output;
    if (ordered != nullptr) {
      send = t.input;
      folded = postscale != 1.0 && ordered->FoldsPostscale(job.dtype, postscale, comm.Size());
    } else if (t.output != t.input) {
      KOLO_CUDA_CALL(
          cudaMemcpyAsync(t.output, t.input, total * es, cudaMemcpyDeviceToDevice, stream));
    }
  } else {
    // One fusion buffer per device, reused by every Response without the host waiting between
    // them: this Response's pack is enqueued on kolo's stream behind the previous Response's
    // unpack, so the GPU starts writing the buffer only once the previous unpack has read it.
    // Everything that touches the buffer runs on that one stream (the finaliser only watches
    // an event), so stream order is the whole of the protection.
    auto& [buf, size] = buffers_[device];
    if (size < total * es) {
      if (buf != nullptr) {
        // Growing (rare: the buffer only grows, to the largest fused Response) frees a buffer
        // that earlier Responses' work may still use: wait for it first. The finaliser keeps
        // watching that work meanwhile and aborts it on a failure, so this wait ends.
        KOLO_CUDA_CALL(cudaStreamSynchronize(stream));
        cudaFree(buf);
      }
      buf = nullptr;
      size = 0;
      KOLO_CUDA_CALL(cudaMalloc(&buf, total * es));
      size = total * es;
    }
    data = buf;
    send = buf;
    // Tensor i's slot in the buffer, both ways: in with the prescale, out with the postscale.
    size_t at = 0;
    for (const FusedTensor& t : job.tensors) {
      char* slot = static_cast<char*>(data) + at;
      pack.push_back({t.input, slot, t.count});
      unpack.push_back({slot, t.output, t.count});
      at += t.count * es;
    }
    KOLO_RETURN_IF_ERROR(BatchedScaleCopy(pack, job.dtype, job.prescale, stream));
  }
  const AllreduceArgs args{send, data, total, job.dtype, op};
  Status ran = folded    ? ordered->EnqueueScaled(comm, args, postscale)
               : ordered ? ordered->Enqueue(comm, args)
                         : algo->Run(comm, args);
  KOLO_RETURN_IF_ERROR(ran.AddContext(std::string(algo->Name())));
  if (direct) {
    if (postscale != 1.0 && !folded) {
      KOLO_RETURN_IF_ERROR(BatchedScaleCopy({{data, data, total}}, job.dtype, postscale, stream));
    }
  } else {
    KOLO_RETURN_IF_ERROR(BatchedScaleCopy(unpack, job.dtype, postscale, stream));
  }
  return Status::OK();
}

#else

DeviceAllreduce::~DeviceAllreduce() = default;

Status DeviceAllreduce::Run(Communicator&, const AllreduceSelector&, int device,
                            const AllreduceJob&, const std::vector<void*>& ready_events) {
  // A build with CUDA but not NCCL records real events at submission.
  for (void* ev : ready_events) DestroyReadyEvent(ev);
  return UnimplementedError("tensors on cuda:" + std::to_string(device) +
                            ", but kolo was built without CUDA and NCCL");
}

#endif

}  // namespace kolo
