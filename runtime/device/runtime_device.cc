// The runtime's CUDA-tensor Responses (allreduce, broadcast, allgather, alltoall, reducescatter)
// after their work is enqueued: the handles complete on the finaliser's thread once kolo's
// stream has done the work (runtime/device/device_finaliser.h), so the background thread goes on
// negotiating meanwhile instead of waiting for the GPU. An output kolo allocates is set on its
// handle there too, just before the handle completes, and the timeline spans of these
// Responses end there (Finish: TensorFinished), not when Execute returns.
//
// Order: every device Response goes through the one finaliser, failures included, so the
// handles of device work complete in the order the Responses ran on every rank. Host Responses
// still complete on the background thread as they run, so a host handle may complete before a
// device handle of an earlier Response; each handle's own completion still follows its work.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "collectives/cuda/device.h"
#include "collectives/node_context.h"
#include "kolo/config.h"
#include "runtime/device/device_finaliser.h"
#include "runtime/device/device_ops.h"
#include "runtime/operations.h"
#include "runtime/runtime.h"

#if KOLO_WITH_NCCL
#include "collectives/nccl/nccl_comm.h"
#endif

namespace kolo {

bool Runtime::CompletesOnDevice(const Response& response) {
  if (response.device < 0) return false;
  switch (response.type) {
    case ResponseType::kAllreduce:
    case ResponseType::kBroadcast:
    case ResponseType::kAllgather:
    case ResponseType::kAlltoall:
    case ResponseType::kReducescatter:
      return true;
    default:
      return false;
  }
}

void Runtime::CompleteOnDevice(int device, Status enqueued, Finaliser::Callback finish) {
  // The first error wins: a failure to enqueue says more than the wait for what did get
  // enqueued before it (which still has to end before the handles complete: the outputs may
  // still be written, the inputs still read).
  auto done = [enqueued, finish = std::move(finish)](Status outcome) mutable {
    finish(enqueued.ok() ? std::move(outcome) : std::move(enqueued));
  };
  if (!enqueued.ok() && CudaDeviceCount() <= device) {
    finaliser_.EnqueueOutcome(Status::OK(), std::move(done));  // no such device: nothing ran
    return;
  }
  EnqueueDeviceCompletion(finaliser_, device, {data_.get()},
                          "waiting for kolo's stream on cuda:" + std::to_string(device),
                          std::move(done));
}

void Runtime::FinishAllreduceOnDevice(const Response& response, int device,
                                      std::vector<TensorEntry> entries, Status enqueued) {
  auto taken = std::make_shared<std::vector<TensorEntry>>(std::move(entries));
  CompleteOnDevice(device, std::move(enqueued), [this, response, taken](Status status) {
    // Entries without a handle (this rank joined; refused on the device) have no Finish to end
    // their timeline spans, and BackgroundLoop left them open for this callback.
    for (const TensorEntry& e : *taken) {
      if (!e.handle) timeline_.TensorFinished(e.request, status);
    }
    // On the finaliser's thread, so not NoteOutOfStep's: device work fails by its own rules
    // (runtime.h there).
    static_cast<void>(FinishAllreduce(response, *taken, std::move(status)));
  });
}

void Runtime::ExecuteDeviceBroadcast(const Response& response, TensorEntry entry) {
  const size_t bytes =
      static_cast<size_t>(NumElements(entry.request.shape)) * DataTypeSize(response.dtype);
  void* ready = entry.ready_event;
  entry.ready_event = nullptr;
  const int device = entry.request.device;  // this rank's: ranks agree on the kind only
  Status enqueued = DeviceBroadcast(*data_, collectives_, device, entry.input, entry.output, bytes,
                                    response.root, ready);
  auto taken = std::make_shared<TensorEntry>(std::move(entry));
  CompleteOnDevice(device, std::move(enqueued), [this, taken](Status status) {
    if (!status.ok()) status.AddContext("broadcast '" + taken->request.name + "'");
    Finish(*taken, std::move(status));
  });
}

void Runtime::ExecuteDeviceOutputOp(const Response& response, TensorEntry entry) {
  const std::string what = OpLabel(entry.request.op, entry.request.name);
  const int device = entry.request.device;  // this rank's: ranks agree on the kind only
  const int rank = data_->Rank(), size = data_->Size();
  void* ready = entry.ready_event;
  entry.ready_event = nullptr;
  // Shared with the callback: the output must outlive the work that writes it, failed or not.
  auto result = std::make_shared<DeviceOpResult>();
  std::vector<int64_t> shape = entry.request.shape;
  Status enqueued;
  switch (response.type) {
    case ResponseType::kAllgather: {
      const AllgatherParts parts = AllgatherPartsOf(response, entry.request);
      enqueued = DeviceAllgather(*data_, collectives_, device, entry.input, parts.bytes, ready,
                                 result.get());
      shape[0] = parts.rows;
      break;
    }
    case ResponseType::kAlltoall: {
      auto parts = AlltoallPartsOf(response, entry.request, rank, size);
      if (!parts.ok()) {
        DestroyReadyEvent(ready);
        enqueued = parts.status();
        break;
      }
      enqueued = DeviceAlltoall(*data_, collectives_, device, entry.input, parts->send_bytes,
                                parts->recv_bytes, ready, result.get());
      shape[0] = parts->rows;
      result->output.splits = std::move(parts->received);
      break;
    }
    case ResponseType::kReducescatter:
      enqueued =
          DeviceReducescatter(*data_, collectives_, device, entry.input,
                              ReducescatterCounts(shape, size), response.dtype, response.reduce_op,
                              response.prescale, response.postscale, ready, result.get());
      shape[0] = ReducescatterShare(shape[0], rank, size);
      break;
    default:
      DestroyReadyEvent(ready);
      enqueued = InternalError("not an operation whose output kolo allocates");
      break;
  }
  result->output.shape = std::move(shape);
  auto taken = std::make_shared<TensorEntry>(std::move(entry));
  CompleteOnDevice(device, std::move(enqueued), [this, taken, result, device, what](Status s) {
    if (!s.ok()) s.AddContext(what);
    // The output goes to a handle someone can still read it from. A failed operation's output
    // is never handed out, nor one whose handle nobody but this callback holds any more (its
    // caller dropped it unwaited; no one can get it back): either goes back in kolo's stream's
    // order, the stream of its last use.
    if (s.ok() && taken->handle.use_count() > 1) {
      // Freed in the order of the caller's stream from now on (BufferFree::stream).
      result->output.data.get_deleter().stream = taken->consumer_stream;
      taken->handle->output() = std::move(result->output);
    } else {
      ReleaseAfterKoloStream(*data_, device, std::move(result->output.data));
    }
    ReleaseAfterKoloStream(*data_, device, std::move(result->staging));
    Finish(*taken, std::move(s));
  });
}

void Runtime::ReleaseDeviceCommunicators() {
#if KOLO_WITH_NCCL
  if (!data_) return;
  ForgetNcclComms(*data_);
  if (const NodeContext* node = data_->node()) {
    if (node->local) ForgetNcclComms(*node->local);
    if (node->cross) ForgetNcclComms(*node->cross);
  }
  ReleaseKoloStreams(*data_);  // last: the communicators' aborts may still drain their work
#endif
}

}  // namespace kolo
