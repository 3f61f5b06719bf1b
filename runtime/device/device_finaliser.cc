#include "runtime/device/device_finaliser.h"

#include <memory>
#include <utility>

#include "kolo/config.h"

#if KOLO_WITH_CUDA
#include "collectives/cuda/cuda_call.h"
#endif
#if KOLO_WITH_CUDA && KOLO_WITH_NCCL
#include "collectives/nccl/nccl_comm.h"
#endif

namespace kolo {

#if KOLO_WITH_CUDA && KOLO_WITH_NCCL

namespace {

class CudaEventProbe : public CompletionProbe {
 public:
  CudaEventProbe(cudaEvent_t event, int device, const std::vector<Communicator*>& watched,
                 std::string what)
      : event_(event), device_(device), comms_(watched), what_(std::move(what)) {
    // Taken now, on the thread that enqueued the work and makes NCCL communicators, so each
    // names the communicator the work ran on (nccl_comm.h).
    for (Communicator* c : comms_) watches_.push_back(WatchNccl(*c, device_));
  }
  ~CudaEventProbe() override { cudaEventDestroy(event_); }

  Progress Poll(Status* error) override {
    if (!device_set_) {
      // The finaliser's thread is kolo's own: make the event's device current once, so the
      // first CUDA call does not open a context on device 0 for nothing.
      cudaSetDevice(device_);
      device_set_ = true;
    }
    // The communicators first: work on one that was aborted meanwhile may still "complete"
    // (NCCL's kernels return), with a result that is lost.
    for (const NcclWatch& w : watches_) {
      Status healthy = CheckNccl(w);
      if (!healthy.ok()) {
        *error = std::move(healthy.AddContext(what_));
        return Progress::kFailed;
      }
    }
    const cudaError_t q = cudaEventQuery(event_);
    if (q == cudaSuccess) return Progress::kDone;
    if (q == cudaErrorNotReady) return Progress::kPending;
    *error = CudaError(q, "cudaEventQuery (completion event)").AddContext(what_);
    return Progress::kFailed;
  }

  Status CheckLiveness() override {
    for (Communicator* c : comms_) {
      Status alive = c->CheckLiveness();
      if (!alive.ok()) return alive.AddContext(what_);
    }
    return Status::OK();
  }

  void Abort() override {
    for (const NcclWatch& w : watches_) AbortNccl(w);
  }

  // The stream has passed the completion event, so nothing of the work still runs; an error of
  // the event counts as passed (the stream will not run it).
  bool Drained() override { return cudaEventQuery(event_) != cudaErrorNotReady; }

 private:
  cudaEvent_t event_;
  int device_;
  std::vector<Communicator*> comms_;
  std::vector<NcclWatch> watches_;
  std::string what_;
  bool device_set_ = false;
};

StatusOr<cudaEvent_t> RecordCompletionEvent(const Communicator& comm, int device) {
  CudaDeviceScope scope(device);
  KOLO_ASSIGN_OR_RETURN(cudaStream_t stream, KoloStream(comm, device));
  cudaEvent_t event = nullptr;
  KOLO_CUDA_CALL(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  const cudaError_t e = cudaEventRecord(event, stream);
  if (e != cudaSuccess) {
    cudaEventDestroy(event);
    return CudaError(e, "cudaEventRecord (completion event on kolo's stream)");
  }
  return event;
}

}  // namespace

void EnqueueDeviceCompletion(Finaliser& finaliser, int device,
                             const std::vector<Communicator*>& watched, const std::string& what,
                             Finaliser::Callback done) {
  if (watched.empty()) {
    finaliser.EnqueueOutcome(InternalError(what + ": no communicator to wait for"),
                             std::move(done));
    return;
  }
  auto event = RecordCompletionEvent(*watched.front(), device);
  if (!event.ok()) {
    finaliser.EnqueueOutcome(Status(event.status()).AddContext(what), std::move(done));
    return;
  }
  finaliser.Enqueue(std::make_unique<CudaEventProbe>(*event, device, watched, what),
                    std::move(done));
}

#else

void EnqueueDeviceCompletion(Finaliser& finaliser, int device, const std::vector<Communicator*>&,
                             const std::string& what, Finaliser::Callback done) {
  finaliser.EnqueueOutcome(UnimplementedError(what + ": cuda:" + std::to_string(device) +
                                              ", but kolo was built without CUDA and NCCL"),
                           std::move(done));
}

#endif

}  // namespace kolo
