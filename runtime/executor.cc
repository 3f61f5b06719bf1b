// The executor: every Response the negotiation returns runs on every rank, in the same order,
// through the runner that one table picks by its operation and memory kind (RunnerFor below:
// host runners in this file and operations.cc, device runners in runtime/device/).
//
// Before a runner sees them, the Response's tensors are taken from the queue, by id (cache hits)
// or by name. This is also where join enters execution, and only here: a tensor this rank never
// submitted because it has joined is kept as an entry without a handle, and the all-reduce and
// barrier runners run it with the reduction's identity (join.cc, device/device_join.cc); every
// other operation that needs a joined rank has already failed in the negotiation.
#include <cstring>
#include <numeric>
#include <optional>

#include "base/logging.h"
#include "collectives/cuda/device.h"
#include "collectives/reduce.h"
#include "runtime/device/device_ops.h"
#include "runtime/operations.h"
#include "runtime/runtime.h"

namespace kolo {
namespace {

enum class Memory { kHost, kDevice, kEither };

// The all-reduce of `entries` (the Response's order) with this rank's tensors; none when an
// entry is absent (this rank has joined): the runner adds the identity instead.
AllreduceJob AllreduceJobOf(const Response& response, std::vector<TensorEntry>& entries,
                            bool* absent) {
  AllreduceJob job;
  job.dtype = response.dtype;
  job.op = response.reduce_op;
  job.prescale = response.prescale;
  job.postscale = response.postscale;
  *absent = false;
  for (const TensorEntry& e : entries) *absent = *absent || !e.handle;
  if (!*absent) {
    for (TensorEntry& e : entries) {
      job.tensors.push_back(
          FusedTensor{e.input, e.output, static_cast<size_t>(NumElements(e.request.shape))});
    }
  }
  return job;
}

}  // namespace

Runtime::Runner Runtime::RunnerFor(ResponseType type, bool on_device) {
  using Entries = std::vector<TensorEntry>;
  struct Row {
    ResponseType type;
    Memory memory;
    Runner run;
  };
  static const Row kRunners[] = {
      {ResponseType::kError, Memory::kEither,
       [](Runtime& rt, const Response& r, Entries& es) {
         for (TensorEntry& e : es) rt.Finish(e, Status(r.error_code, r.error));
       }},
      {ResponseType::kAllreduce, Memory::kHost,
       [](Runtime& rt, const Response& r, Entries& es) { rt.ExecuteAllreduce(r, es); }},
      {ResponseType::kAllreduce, Memory::kDevice,
       [](Runtime& rt, const Response& r, Entries& es) { rt.ExecuteDeviceAllreduce(r, es); }},
      {ResponseType::kAllgather, Memory::kHost,
       [](Runtime& rt, const Response& r, Entries& es) {
         rt.FinishHost(es[0], rt.ExecuteAllgather(r, es[0]));
       }},
      {ResponseType::kAllgather, Memory::kDevice,
       [](Runtime& rt, const Response& r, Entries& es) {
         rt.ExecuteDeviceOutputOp(r, std::move(es[0]));
       }},
      {ResponseType::kBroadcast, Memory::kHost,
       [](Runtime& rt, const Response& r, Entries& es) {
         rt.FinishHost(es[0], rt.ExecuteBroadcast(r, es[0]));
       }},
      {ResponseType::kBroadcast, Memory::kDevice,
       [](Runtime& rt, const Response& r, Entries& es) {
         rt.ExecuteDeviceBroadcast(r, std::move(es[0]));
       }},
      {ResponseType::kReducescatter, Memory::kHost,
       [](Runtime& rt, const Response& r, Entries& es) {
         rt.FinishHost(es[0], rt.ExecuteReducescatter(r, es[0]));
       }},
      {ResponseType::kReducescatter, Memory::kDevice,
       [](Runtime& rt, const Response& r, Entries& es) {
         rt.ExecuteDeviceOutputOp(r, std::move(es[0]));
       }},
      {ResponseType::kAlltoall, Memory::kHost,
       [](Runtime& rt, const Response& r, Entries& es) {
         rt.FinishHost(es[0], rt.ExecuteAlltoall(r, es[0]));
       }},
      {ResponseType::kAlltoall, Memory::kDevice,
       [](Runtime& rt, const Response& r, Entries& es) {
         rt.ExecuteDeviceOutputOp(r, std::move(es[0]));
       }},
      {ResponseType::kBarrier, Memory::kEither,
       [](Runtime& rt, const Response&, Entries& es) { rt.ExecuteBarrier(es[0]); }},
  };
  const Memory memory = on_device ? Memory::kDevice : Memory::kHost;
  for (const Row& row : kRunners) {
    if (row.type == type && (row.memory == memory || row.memory == Memory::kEither)) {
      return row.run;
    }
  }
  return nullptr;
}

void Runtime::Execute(const Response& response) {
  if (response.type == ResponseType::kJoin) {
    ExecuteJoin(response);
    return;
  }
  bool joined;
  {
    std::lock_guard<std::mutex> lock(join_mu_);
    joined = !join_name_.empty();
  }
  std::vector<TensorEntry> entries;
  const size_t tensors = response.NumTensors();
  entries.reserve(tensors);
  // Responses served from the cache carry this rank's ids of its own in-flight submissions:
  // no hashing, no name (fused hits may come without names).
  const bool by_id = !response.ids.empty();
  for (size_t i = 0; i < tensors; ++i) {
    TensorEntry e = by_id ? queue_.Take(response.ids[i])
                          : queue_.Take(response.names[i], response.type == ResponseType::kError);
    if (!e.handle && joined && !by_id &&
        (response.type == ResponseType::kAllreduce || response.type == ResponseType::kBarrier)) {
      e.request.name = response.names[i];  // no handle: this rank takes part with the identity
      entries.push_back(std::move(e));
      continue;
    }
    if (!e.handle) {
      // Expected for an error naming a submission this rank refused (its caller already knows).
      if (response.type != ResponseType::kError) {
        KOLO_LOG_ERROR("runtime", "response names '{}' which this rank has not submitted",
                       i < response.names.size() ? response.names[i]
                                                 : "id " + std::to_string(response.ids[i]));
      }
      continue;
    }
    entries.push_back(std::move(e));
  }
  if (entries.size() != tensors && response.type != ResponseType::kError) {
    const std::string why =
        ": coordinator and rank " + std::to_string(layout_.rank) + " disagree on the tensors";
    // This rank skips a collective its peers run: it is out of step with them (a bug).
    if (out_of_step_.ok()) {
      out_of_step_ = InternalError((entries.empty()
                                        ? std::string("a collective")
                                        : OpLabel(entries[0].request.op, entries[0].request.name)) +
                                   why);
    }
    for (TensorEntry& e : entries)
      Finish(e, InternalError(OpLabel(e.request.op, e.request.name) + why));
    return;
  }
  const Runner run = RunnerFor(response.type, response.device >= 0);
  if (!run) {
    for (TensorEntry& e : entries) {
      if (e.handle) {
        Finish(e, InternalError(OpLabel(e.request.op, e.request.name) +
                                ": no runner for this operation on this memory"));
      }
    }
    return;
  }
  run(*this, response, entries);
}

void Runtime::ExecuteBarrier(TensorEntry& entry) {
  Status s = data_->Barrier();
  if (!s.ok()) s.AddContext("barrier");
  NoteOutOfStep(s);
  if (entry.handle) {
    Finish(entry, s);
  } else {
    // A barrier of the other ranks while this one has joined: it took part, so its next
    // barrier has the same name as theirs.
    barriers_.fetch_add(1);
    if (!s.ok()) KOLO_LOG_ERROR("runtime", "barrier while joined: {}", s.ToString());
  }
}

void Runtime::ExecuteDeviceAllreduce(const Response& response, std::vector<TensorEntry>& entries) {
  bool absent = false;
  AllreduceJob job = AllreduceJobOf(response, entries, &absent);
  JoinedScratch scratch;  // identity buffers when this rank has joined
  Status status;
  std::vector<void*> ready;
  for (TensorEntry& e : entries) {
    ready.push_back(e.ready_event);
    e.ready_event = nullptr;
  }
  int device = -1;
  for (const TensorEntry& e : entries) {
    if (!e.handle) continue;
    if (device >= 0 && e.request.device != device && status.ok()) {
      // Cannot happen: ClaimDevice refuses a second GPU at submission (on every rank).
      status = InvalidArgumentError("the tensors of one fused all-reduce are on cuda:" +
                                    std::to_string(device) + " and cuda:" +
                                    std::to_string(e.request.device) + " on rank " +
                                    std::to_string(layout_.rank) +
                                    "; kolo drives one GPU per process");
    }
    if (device < 0) device = e.request.device;
  }
  if (absent) {
    // A joined rank's identity goes on its own device; the events are waited for there
    // (and consumed), before the prescaled copies read the inputs.
    device = JoinedDevice(response);
    status = DeviceJoinedAllreduceJob(*data_, response, entries, device, &ready, &job, &scratch);
  }
  if (status.ok()) {
    status = device_allreduce_.Run(*data_, selector_, device, job, ready);
  } else {
    for (void* ev : ready) DestroyReadyEvent(ev);  // consumed ones are nullptr already
  }
  FinishAllreduceOnDevice(response, device, std::move(entries), std::move(status));
}

void Runtime::ExecuteAllreduce(const Response& response, std::vector<TensorEntry>& entries) {
  bool absent = false;
  AllreduceJob job = AllreduceJobOf(response, entries, &absent);
  JoinedScratch scratch;  // identity buffers when this rank has joined
  Status status;
  if (absent) status = JoinedAllreduceJob(response, entries, &job, &scratch);
  if (job.op == ReduceOp::kAdasum) {
    // One algorithm does Adasum (submission refused the rest: other dtypes, rank counts that
    // are not powers of two, CUDA tensors), so KOLO_ALLREDUCE_ALGO, which forces how the
    // other ops reduce, does not apply.
    if (status.ok()) {
      std::optional<TimelineStages> stages;
      if (timeline_.enabled()) stages.emplace(timeline_, response.names, "ALLREDUCE (adasum)");
      status = fusion_.RunAdasum(*data_, adasum_, job, stages ? &*stages : nullptr);
    }
    NoteOutOfStep(FinishAllreduce(response, entries, status));
    return;
  }
  size_t count = 0;
  for (const FusedTensor& t : job.tensors) count += t.count;
  SelectionInput in = DescribeCommunicator(*data_);
  in.dtype = IsHalf(job.dtype) ? DataType::kFloat32 : job.dtype;
  in.count = count;
  in.bytes = count * DataTypeSize(in.dtype);
  in.op = LowerReduce(job.op, job.postscale, layout_.size).wire_op;
  auto algorithm = selector_.Select(in);
  if (!status.ok()) {
    // A failed allocation (as in ExecuteAllgather) or a broken invariant: reported below.
  } else if (!algorithm.ok()) {
    status = algorithm.status();
  } else {
    // The executor's stages become the tensors' timeline activities.
    std::optional<TimelineStages> stages;
    if (timeline_.enabled()) {
      stages.emplace(timeline_, response.names,
                     "ALLREDUCE (" + std::string((*algorithm)->Name()) + ")");
    }
    progress_.set_algorithm((*algorithm)->Name());
    status = fusion_.Run(*data_, **algorithm, job, stages ? &*stages : nullptr);
  }
  NoteOutOfStep(FinishAllreduce(response, entries, status));
}

Status Runtime::FinishAllreduce(const Response& response, std::vector<TensorEntry>& entries,
                                Status status) {
  if (status.ok()) {
    for (TensorEntry& e : entries) {
      if (e.handle) Finish(e, status);
    }
    return status;
  }
  // Each handle's error names its own tensor; the log line (and the returned status) names the
  // group by its first.
  const std::string fused = entries.size() > 1
                                ? " (fused with " + std::to_string(entries.size() - 1) + " more, " +
                                      std::to_string(ResponseBytes(response)) + " bytes in all)"
                                : "";
  auto what = [&](const std::string& name) { return "allreduce '" + name + "'" + fused; };
  Status group = status;
  group.AddContext(what(entries.empty() ? response.names[0] : entries[0].request.name));
  KOLO_LOG_ERROR("runtime", "{}", group.ToString());
  for (TensorEntry& e : entries) {
    if (!e.handle) continue;
    Status own = status;
    Finish(e, own.AddContext(what(e.request.name)));
  }
  return group;
}

Status Runtime::ExecuteAllgather(const Response& response, TensorEntry& entry) {
  const AllgatherParts parts = AllgatherPartsOf(response, entry.request);
  const size_t total = std::accumulate(parts.bytes.begin(), parts.bytes.end(), size_t{0});
  OutputBuffer out;
  out.data.reset(std::malloc(total ? total : 1));
  if (!out.data) {
    return ResourceExhaustedError("allgather '" + entry.request.name + "': cannot allocate " +
                                  std::to_string(total) + " bytes for the output");
  }
  Status s = collectives_.Allgatherv(*data_, entry.input, parts.bytes[layout_.rank],
                                     out.data.get(), parts.bytes);
  if (!s.ok()) return s.AddContext("allgather '" + entry.request.name + "'");
  out.shape = entry.request.shape;
  out.shape[0] = parts.rows;
  entry.handle->output() = std::move(out);
  return Status::OK();
}

Status Runtime::ExecuteBroadcast(const Response& response, TensorEntry& entry) {
  const size_t bytes =
      static_cast<size_t>(NumElements(entry.request.shape)) * DataTypeSize(response.dtype);
  if (layout_.rank == response.root && entry.output != entry.input && bytes) {
    std::memcpy(entry.output, entry.input, bytes);
  }
  Status s = collectives_.Broadcast(*data_, entry.output, bytes, response.root);
  if (!s.ok()) return s.AddContext("broadcast '" + entry.request.name + "'");
  return Status::OK();
}

}  // namespace kolo
