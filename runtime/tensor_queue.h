// The hand-over between submitting threads and the background thread: the table of this
// rank's in-flight tensors and the Requests not yet sent to the coordinator. A name stays in
// the table until its operation completes (while the background thread runs it, as a
// reservation without the entry), which is what refuses a second submission of a name still
// in flight.
//
// Names are interned: Add gives each name an integer id (Request::id), hashing the name once,
// and the table is an array over ids, so that the background thread, which takes and releases
// every tensor of every cycle, indexes instead of hashing. An id outlives its operation, so a
// training loop's names keep theirs from step to step; names unused for a while are dropped in
// bulk (and their ids reused) once they outnumber those in flight, so that unique names
// (barriers, joins, one-off tensors) do not grow the table forever.
//
// The background thread reads new Requests where the table keeps them (TakeNewRequests hands
// out pointers) rather than taking a copy of each: a copy per submission per cycle, with its
// heap-allocated shape, was a large part of a cycle's cost with a thousand tensors. The table
// is a deque, so that interning a new name never moves the entries handed out.
#ifndef KOLO_RUNTIME_TENSOR_QUEUE_H_
#define KOLO_RUNTIME_TENSOR_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "runtime/handle.h"
#include "protocol/message.h"
#include "runtime/negotiation/request_key.h"

namespace kolo {

struct TensorEntry {
  Request request;
  const void* input = nullptr;
  void* output = nullptr;
  std::shared_ptr<Handle> handle;
  // CUDA tensors: the event recorded on the framework's stream at submission (a cudaEvent_t,
  // collectives/cuda/device.h), consumed by the execution; nullptr otherwise.
  void* ready_event = nullptr;
  // CUDA tensors: the framework's stream at submission (CUDA's legacy stream when none was
  // given), in whose order an output kolo allocates is freed (BufferFree::stream).
  void* consumer_stream = nullptr;
};

class TensorQueue {
 public:
  // Fails with kInvalidArgument when the name is in flight, kFailedPrecondition when closed
  // (`closed_reason`). Sets the entry's request.id.
  Status Add(TensorEntry entry);
  // Adds every entry or none (a name in flight or repeated in `entries` refuses the group), so
  // the background thread takes a group's Requests in one batch.
  Status AddGroup(std::vector<TensorEntry> entries);
  // Queues a Request without a local entry: a submission this rank refused, announced so the
  // coordinator can fail the name on the other ranks.
  void AddRefused(Request request);
  // Replaces *out with the Requests added since the last call, in order, as pointers to the
  // queue's own copies. Each stays valid and unchanged until its entry is taken or released,
  // the next TakeNewRequests, or Close.
  // Take, TakeNewRequests and Close are for one thread (the background thread); Add, AddGroup,
  // AddRefused and Release may run on any thread meanwhile (Release: the finaliser's, which
  // completes the handles of GPU work; every call holds mu_, and Release only touches the
  // slot of an entry already taken, never one whose Request was handed out and not taken).
  // `keys`, when given, gets RequestKey::Of each of them, in the same order (made on the
  // submitting thread).
  void TakeNewRequests(std::vector<const Request*>* out, std::vector<RequestKey>* keys = nullptr);
  bool HasNewRequests();
  // The names of `handles`' submissions, when every one of them is still waiting to be
  // negotiated (in flight, not taken for execution); false otherwise (one is being executed or
  // has completed: its caller is not stuck in negotiation).
  bool NegotiatingNames(const std::vector<const Handle*>& handles, std::vector<std::string>* names);
  // Moves out the entry of `name` for execution (nullptr handle if absent); the name stays
  // reserved until Release. `error`: the Response is an error, which may answer this rank's
  // refusal of the name; then it takes no submission made after the refusal (see refusals_).
  TensorEntry Take(const std::string& name, bool error = false);
  // The same by the id Add gave the entry (Response::ids: this rank's own in-flight
  // submissions, and a name in flight keeps its id), without hashing or comparing names; an
  // empty entry when the id holds nothing in flight.
  TensorEntry Take(int32_t id);
  // Frees the name of a taken entry (call just before completing its handle): by its id when
  // it has one.
  void Release(const Request& request);
  void Release(const std::string& name);
  // Refuses later Adds with `reason` and returns every entry still in the table.
  std::vector<TensorEntry> Close(const std::string& reason);

  // Submissions in flight (added and not yet released): 0 when nothing of this rank's waits.
  size_t in_flight() {
    std::lock_guard<std::mutex> lock(mu_);
    return in_flight_;
  }

  // Names kept interned while not in flight before a sweep may drop them (for tests).
  static constexpr size_t kMaxIdleNames = 4096;
  size_t interned() {
    std::lock_guard<std::mutex> lock(mu_);
    return ids_.size();
  }

 private:
  struct Slot {
    bool in_flight = false;
    bool taken = false;    // in flight and moved out by Take: the reservation
    bool pending = false;  // entry.request is in new_requests_, not yet handed out
    uint32_t serial = 0;   // Request::id_serial of the name holding this id now
    TensorEntry entry;
  };
  struct NewRequest {
    const Request* request;  // in slots_ (entry.request) or in loose_
    int32_t id;              // the slot holding it, or -1 (in loose_)
  };
  // Queues a Request in new_requests_ with its key; mu_ held.
  void AddNew(const Request* request, int32_t id);
  // The name's id, interning it if new; mu_ held.
  int32_t Intern(const std::string& name);
  // Ends the reservation of `id`; mu_ held.
  void ReleaseId(int32_t id);
  // Before a slot's entry leaves it while its Request waits to be handed out (an error
  // Response can name a submission made after this cycle's TakeNewRequests): a copy of the
  // Request goes out instead. mu_ held.
  void Detach(int32_t id);
  // Queues a Request without a slot; mu_ held.
  void AddLoose(Request request);
  std::string InFlightError(const Request& r) const;

  std::mutex mu_;
  std::unordered_map<std::string, int32_t> ids_;  // every interned name
  std::deque<Slot> slots_;                        // by id
  std::vector<int32_t> free_ids_;                 // ids of names dropped by a sweep
  uint32_t last_serial_ = 0;  // the Request::id_serial given last (one per interning)
  size_t in_flight_ = 0;
  std::vector<NewRequest> new_requests_;
  std::vector<RequestKey> new_keys_;  // RequestKey::Of new_requests_, same order
  // Requests without a slot (refused ones, detached copies); the first `loose_handed_` went out
  // with the last TakeNewRequests and are dropped by the next.
  std::deque<Request> loose_;
  size_t loose_handed_ = 0;
  // Names of this rank's refusals that went out and have no Response yet. A refusal goes out
  // ahead of any later submission of its name, so the coordinator answers it first, with an
  // error: the next error Response naming it is the refusal's. (Two refusals of a name out at
  // once, or a refusal beside this rank's own earlier submission of the name, meet in one entry
  // of the coordinator's table, which answers them all with one "submitted twice" error.) Take
  // must then leave alone a submission of that name whose Request has not gone out: the
  // refusing caller may submit the name again as soon as its peers' errors show the refusal
  // negotiated, before this rank's background thread has executed that error. Failing the new
  // submission with the old refusal would be wrong, and its Request, sent all the same, would
  // make the coordinator start a collective for which this rank has no entry, while its peers
  // wait in it. A submission that went out before the Response met the refusal in the
  // coordinator's table: that error is the submission's too, and Take hands it over. (A
  // refusal because the rank had joined, which the coordinator may drop unanswered, is not
  // kept.)
  std::unordered_set<std::string> refusals_;
  bool closed_ = false;
  std::string closed_reason_;
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_TENSOR_QUEUE_H_
