// The submitting side of the runtime: checking a Submission, where its memory is, and queueing
// it (or a group) for the background thread; refused submissions are announced so that the
// peers get the error instead of waiting (runtime.h). Runs on the callers' threads.
#include <cmath>
#include <cstring>
#include <numeric>

#include "collectives/cuda/device.h"
#include "runtime/device/device_ops.h"
#include "runtime/operations.h"
#include "runtime/runtime.h"
#include "runtime/validate.h"

namespace kolo {

namespace {

std::string Describe(const Submission& s) {
  return OpLabel(s.op, s.name);
}

// The Request every rank's coordinator sees for a submission made on `rank`.
Request RequestOf(const Submission& s, int rank) {
  Request r;
  r.rank = rank;
  r.op = s.op;
  r.name = s.name;
  r.dtype = s.dtype;
  r.shape = s.shape;
  r.reduce_op = s.reduce_op;
  r.root = s.root;
  r.prescale = s.prescale;
  r.postscale = s.postscale;
  return r;
}

std::string Where(const PointerKind& k) {
  return k.memory == MemoryKind::kCuda ? "cuda:" + std::to_string(k.device) + " memory"
                                       : "host memory";
}

// Sets r->device from the submission (or from its buffers, asking CUDA); kInvalidArgument when
// input and output are in different memories, or for a reduction of CUDA tensors the device
// path cannot do (DeviceReductionRefusal: a dtype NCCL has not, integer Average). The message
// is the reason alone, as ValidateSubmission's.
Status ResolveDevice(const Submission& s, Request* r) {
  int device = s.device;
  if (device == kDetectDevice) {
    device = -1;
    if (CudaBuilt() && s.input != nullptr) {
      const PointerKind in = ClassifyPointer(s.input);
      const PointerKind out = s.output != nullptr ? ClassifyPointer(s.output) : in;
      if (in.memory != out.memory || in.device != out.device) {
        return InvalidArgumentError("input is in " + Where(in) + ", output in " + Where(out) +
                                    "; both must be in the same memory");
      }
      device = in.memory == MemoryKind::kCuda ? in.device : -1;
    }
  }
  const bool reduces = s.op == OpType::kAllreduce || s.op == OpType::kReducescatter;
  if (device >= 0 && reduces) {
    const std::string why = DeviceReductionRefusal(s.dtype, s.reduce_op);
    if (!why.empty()) {
      return InvalidArgumentError(std::string(DataTypeName(s.dtype)) + " tensor on cuda:" +
                                  std::to_string(device) + ": " + why);
    }
  }
  r->device = device;
  return Status::OK();
}

}  // namespace

Status Runtime::ClaimDevice(int device) {
  if (device < 0) return Status::OK();
  int mine = -1;
  if (process_device_.compare_exchange_strong(mine, device) || mine == device) {
    return Status::OK();
  }
  return InvalidArgumentError("on cuda:" + std::to_string(device) +
                              ", but this process's CUDA tensors are on cuda:" +
                              std::to_string(mine) +
                              " (its first); kolo drives one GPU per process");
}

Status Runtime::Admit(const Submission& s, Request* r) {
  KOLO_RETURN_IF_ERROR(ValidateSubmission(s, layout_.size));
  KOLO_RETURN_IF_ERROR(ResolveDevice(s, r));
  if (s.op == OpType::kAlltoall) r->splits = ResolvedSplits(s, layout_.size);
  KOLO_RETURN_IF_ERROR(ClaimDevice(r->device));
  if (r->device >= 0) last_device_ = r->device;
  return Status::OK();
}

StatusOr<std::shared_ptr<Handle>> Runtime::Enqueue(const Submission& s) {
  TensorEntry entry;
  entry.request = RequestOf(s, layout_.rank);
  Request& r = entry.request;
  // `reason`: why this rank refuses the submission, announced to the peers as it is; the
  // caller's error is labelled with the operation and the name. A nameless submission cannot
  // be announced (no peer could match it): it is refused here alone.
  Status reason = s.name.empty() ? InvalidArgumentError("empty name") : Admit(s, &r);
  std::unique_lock<std::mutex> join_lock(join_mu_);
  if (!join_name_.empty()) {
    if (s.op == OpType::kJoin) {
      return FailedPreconditionError("join: rank " + std::to_string(layout_.rank) +
                                     " has already joined (one thread per rank)");
    }
    if (reason.ok()) {
      r.refused = kRefusedJoined;
      queue_.AddRefused(r);
      join_lock.unlock();
      Wake();
      return FailedPreconditionError(Describe(s) + ": rank " + std::to_string(layout_.rank) +
                                     " has joined; no operation can be submitted until every "
                                     "rank has joined");
    }
  }
  if (s.op != OpType::kJoin) join_lock.unlock();
  // A CUDA tensor is always ordered after its writer: without a stream, CUDA's legacy one.
  if (reason.ok() && r.device >= 0) {
    auto ev = RecordReadyEvent(r.device, s.ready_stream);
    entry.consumer_stream = ReadyStreamOrLegacy(s.ready_stream);
    if (ev.ok()) {
      entry.ready_event = *ev;
    } else {
      reason = ev.status();
    }
  }
  if (!reason.ok()) {
    // The peers have submitted or will submit this name too: tell the coordinator, so they
    // get an error instead of waiting for this rank forever.
    if (s.name.empty()) {
      return Status(reason.code(), std::string(OpTypeName(s.op)) + ": " + reason.message());
    }
    if (s.op != OpType::kJoin) {
      r.refused = reason.message();
      queue_.AddRefused(r);
      Wake();
    }
    return Status(reason.code(), Describe(s) + ": " + reason.message());
  }
  entry.input = s.input;
  entry.output = s.output;
  entry.handle = std::make_shared<Handle>();
  entry.handle->set_watch(wait_watch_);
  auto handle = entry.handle;
  timeline_.Submitted(entry.request);  // before the background thread can take it
  void* const ready_event = entry.ready_event;
  if (Status added = queue_.Add(std::move(entry)); !added.ok()) {
    DestroyReadyEvent(ready_event);
    return added;
  }
  if (s.op == OpType::kJoin) {
    join_name_ = s.name;
    join_lock.unlock();
  }
  Wake();
  return handle;
}


Status Runtime::Refuse(OpType op, const std::string& name, const std::string& why) {
  const bool reserved =
      name.rfind(kBarrierPrefix, 0) == 0 || name.rfind(kJoinPrefix, 0) == 0;
  if (name.empty() || reserved || op == OpType::kBarrier || op == OpType::kJoin) {
    return InvalidArgumentError("refuse: a named allreduce, allgather, broadcast, reducescatter "
                                "or alltoall is needed, not " + OpLabel(op, name));
  }
  Request r;
  r.rank = layout_.rank;
  r.op = op;
  r.name = name;
  {
    // Under join_mu_, ordered with this rank's join as Enqueue's refusals are.
    std::lock_guard<std::mutex> join_lock(join_mu_);
    r.refused = !join_name_.empty()  ? std::string(kRefusedJoined)
                : why.empty()        ? std::string("refused by the caller")
                                     : why;
    queue_.AddRefused(std::move(r));
  }
  Wake();
  return Status::OK();
}

StatusOr<std::vector<std::shared_ptr<Handle>>> Runtime::EnqueueGroup(
    const std::vector<Submission>& group) {
  if (group.empty()) return InvalidArgumentError("grouped operation: no tensors");
  const OpType op = group[0].op;
  const std::string what = "grouped " + std::string(OpTypeName(op)) + " '" + group[0].name +
                           "' (" + std::to_string(group.size()) + " tensors)";
  if (op != OpType::kAllreduce && op != OpType::kAllgather && op != OpType::kReducescatter) {
    return InvalidArgumentError(what + ": only allreduce, allgather and reducescatter group");
  }
  std::vector<TensorEntry> entries(group.size());
  Status bad;
  std::string bad_reason;
  size_t bad_index = 0;
  for (size_t i = 0; i < group.size(); ++i) {
    const Submission& s = group[i];
    Request& r = entries[i].request;
    r = RequestOf(s, layout_.rank);
    r.group = group[0].name;
    r.group_size = static_cast<int32_t>(group.size());
    // Why this member is refused, without its label (as Enqueue's `reason`).
    Status v = s.op != op ? InvalidArgumentError("a group holds one operation (" +
                                                 std::string(OpTypeName(op)) + ")")
               : s.name.empty() ? InvalidArgumentError("empty name")
                                : Admit(s, &r);
    if (v.ok() && r.device >= 0) {
      auto ev = RecordReadyEvent(r.device, s.ready_stream);
      entries[i].consumer_stream = ReadyStreamOrLegacy(s.ready_stream);
      if (ev.ok()) {
        entries[i].ready_event = *ev;
      } else {
        v = ev.status();
      }
    }
    if (!v.ok() && bad.ok()) {
      bad_reason = v.message();
      // A nameless member's own reason has no name to label (as Enqueue's).
      const std::string label =
          s.name.empty() && s.op == op ? std::string(OpTypeName(s.op)) : Describe(s);
      bad = Status(v.code(), label + ": " + v.message());
      bad_index = i;
    }
    entries[i].input = s.input;
    entries[i].output = s.output;
  }
  std::unique_lock<std::mutex> join_lock(join_mu_);
  const bool joined = !join_name_.empty();
  if (bad.ok() && joined) {
    bad = FailedPreconditionError(what + ": rank " + std::to_string(layout_.rank) +
                                  " has joined; no operation can be submitted until every rank "
                                  "has joined");
  }
  if (!bad.ok()) {
    // Every member fails on the peers too, so none of them waits for this rank. The refusals
    // go out ungrouped: a member without a name cannot be announced, and the coordinator would
    // hold the others for it forever (then hand them to the next group of the same key). A
    // refusal fails its name whatever the peers' group says, and a peer's group of which one
    // member was refused fails whole.
    const std::string bad_name = group[bad_index].name;
    for (size_t i = 0; i < entries.size(); ++i) {
      Request& r = entries[i].request;
      if (r.name.empty()) continue;
      r.group.clear();
      r.group_size = 0;
      if (joined) {
        r.refused = kRefusedJoined;
      } else if (i == bad_index) {
        r.refused = bad_reason;
      } else {
        r.refused = "grouped with '" + bad_name + "', which was refused: " + bad.message();
      }
      queue_.AddRefused(std::move(r));
    }
    for (TensorEntry& e : entries) DestroyReadyEvent(e.ready_event);
    join_lock.unlock();
    Wake();
    return bad.message().rfind(what, 0) == 0 ? bad : bad.AddContext(what);
  }
  join_lock.unlock();
  std::vector<std::shared_ptr<Handle>> handles;
  for (TensorEntry& e : entries) {
    e.handle = std::make_shared<Handle>();
    e.handle->set_watch(wait_watch_);
    handles.push_back(e.handle);
  }
  KOLO_RETURN_IF_ERROR(queue_.AddGroup(std::move(entries)));
  Wake();
  return handles;
}

}  // namespace kolo
