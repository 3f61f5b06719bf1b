// The runtime's CUDA-tensor Responses after their work is enqueued: the handles complete on the
// finaliser's thread once kolo's stream has done the work (runtime/device_finaliser.h), so the
// background thread goes on negotiating meanwhile.
//
// Order: every device Response goes through the one finaliser, failures included, so the
// handles of device work complete in the order the Responses ran on every rank. Host Responses
// still complete on the background thread as they run, so a host handle may complete before a
// device handle of an earlier Response; each handle's own completion still follows its work.
#include <memory>
#include <utility>

#include "collectives/cuda/device.h"
#include "runtime/device_finaliser.h"
#include "runtime/runtime.h"

namespace kolo {

bool Runtime::CompletesOnDevice(const Response& response) {
  return response.device >= 0 &&
         (response.type == ResponseType::kAllreduce || response.type == ResponseType::kBroadcast);
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
    FinishAllreduce(response, *taken, std::move(status));
  });
}

void Runtime::ExecuteDeviceBroadcast(const Response& response, TensorEntry entry) {
  const size_t bytes =
      static_cast<size_t>(NumElements(entry.request.shape)) * DataTypeSize(response.dtype);
  void* ready = entry.ready_event;
  entry.ready_event = nullptr;
  const int device = entry.request.device;  // this rank's: ranks agree on the kind only
  Status enqueued = DeviceBroadcast(*data_, device, entry.input, entry.output, bytes,
                                    response.root, ready);
  auto taken = std::make_shared<TensorEntry>(std::move(entry));
  CompleteOnDevice(device, std::move(enqueued), [this, taken](Status status) {
    if (!status.ok()) status.AddContext("broadcast '" + taken->request.name + "'");
    Finish(*taken, std::move(status));
  });
}

}  // namespace kolo
