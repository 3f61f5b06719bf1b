// The hand-over between submitting threads and the background thread: the table of this
// rank's in-flight tensors (name -> entry) and the Requests not yet sent to the coordinator.
// A name stays in the table until its operation completes (while the background thread runs
// it, as a reservation without the entry), which is what refuses a second submission of a name
// still in flight.
#ifndef KOLO_RUNTIME_TENSOR_QUEUE_H_
#define KOLO_RUNTIME_TENSOR_QUEUE_H_

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/handle.h"
#include "runtime/message.h"

namespace kolo {

struct TensorEntry {
  Request request;
  const void* input = nullptr;
  void* output = nullptr;
  std::shared_ptr<Handle> handle;
};

class TensorQueue {
 public:
  // Fails with kInvalidArgument when the name is in flight, kFailedPrecondition when closed
  // (`closed_reason`).
  Status Add(TensorEntry entry);
  // Adds every entry or none (a name in flight or repeated in `entries` refuses the group), so
  // the background thread takes a group's Requests in one batch.
  Status AddGroup(std::vector<TensorEntry> entries);
  // Queues a Request without a local entry: a submission this rank refused, announced so the
  // coordinator can fail the name on the other ranks.
  void AddRefused(Request request);
  // Moves out the Requests added since the last call.
  std::vector<Request> TakeNewRequests();
  bool HasNewRequests();
  // Moves out the entry of `name` for execution (nullptr handle if absent); the name stays
  // reserved until Release.
  TensorEntry Take(const std::string& name);
  // Frees the name (call just before completing its handle).
  void Release(const std::string& name);
  // Refuses later Adds with `reason` and returns every entry still in the table.
  std::vector<TensorEntry> Close(const std::string& reason);

 private:
  std::mutex mu_;
  std::unordered_map<std::string, TensorEntry> table_;
  std::vector<Request> new_requests_;
  bool closed_ = false;
  std::string closed_reason_;
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_TENSOR_QUEUE_H_
