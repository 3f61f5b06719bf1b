#include "runtime/runtime.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>

#include "base/logging.h"
#include "collectives/cuda/device.h"
#include "fusion/planner.h"
#include "runtime/device_ops.h"
#include "runtime/operations.h"

namespace kolo {

namespace {

ControllerOptions ControllerOptionsOf(const Config& c) {
  ControllerOptions o;
  o.fusion_threshold_bytes = c.fusion_threshold_bytes;
  o.fusion_direct_bytes = c.fusion_direct_bytes;
  o.cache_capacity = c.cache_capacity;
  o.stall.enabled = !c.stall_check_disable;
  o.stall.check_seconds = c.stall_check_seconds;
  o.stall.shutdown_seconds = c.stall_shutdown_seconds;
  o.cycle_time_ms = c.cycle_time_ms;
  o.autotune = c.autotune;
  o.autotune_options.log_path = c.autotune_log;
  o.autotune_options.warmup_samples = c.autotune_warmup_samples;
  o.autotune_options.steps_per_sample = c.autotune_steps_per_sample;
  return o;
}

}  // namespace

Runtime::Runtime(Config config, RankLayout layout, std::unique_ptr<Communicator> control,
                 std::unique_ptr<Communicator> data)
    : config_(config),
      layout_(layout),
      control_(std::move(control)),
      data_(std::move(data)),
      controller_(*control_, ControllerOptionsOf(config)),
      fusion_(static_cast<size_t>(config.fusion_chunk_bytes)) {}

Runtime::~Runtime() { Shutdown(); }

Status Runtime::Start() {
  // kolo_init opens it earlier, so that an unwritable path fails every rank's start.
  if (!config_.timeline_path.empty() && !timeline_.enabled()) {
    KOLO_RETURN_IF_ERROR(StartTimeline(config_.timeline_path, config_.timeline_mark_cycles)
                             .AddContext("KOLO_TIMELINE"));
  }
  CostModel cost;
  if (cost_model_) {
    cost = *cost_model_;
  } else if (!config_.tuning_file.empty()) {
    auto loaded = CostModel::Load(config_.tuning_file);
    if (!loaded.ok()) return Status(loaded.status()).AddContext("KOLO_TUNING_FILE");
    cost = *loaded;
  }
  selector_ = AllreduceSelector(config_.allreduce_algo, std::move(cost));
  if (config_.allreduce_algo != "auto" && !config_.allreduce_algo.empty() &&
      !selector_.Find(config_.allreduce_algo)) {
    // Selecting anything reports the valid names.
    return selector_.Select(SelectionInput()).status();
  }
  CollectiveNames names;
  names.allgather = config_.allgather_algo;
  names.broadcast = config_.broadcast_algo;
  names.reducescatter = config_.reducescatter_algo;
  names.alltoall = config_.alltoall_algo;
  auto choice = CollectiveChoice::Make(names);
  if (!choice.ok()) return choice.status();
  collectives_ = std::move(*choice);
  KOLO_RETURN_IF_ERROR(fusion_.Prepare());
  KOLO_RETURN_IF_ERROR(controller_.Start());
  running_ = true;
  thread_ = std::thread([this] { BackgroundLoop(); });
  return Status::OK();
}

namespace {

std::string Describe(const Submission& s) {
  return std::string(OpTypeName(s.op)) + " '" + s.name + "'";
}

Status Validate(const Submission& s, int size) {
  if (s.name.empty()) return InvalidArgumentError(std::string(OpTypeName(s.op)) + ": empty name");
  for (int64_t d : s.shape) {
    if (d < 0) {
      return InvalidArgumentError(Describe(s) + ": negative dimension in shape " +
                                  ShapeString(s.shape));
    }
  }
  int64_t bytes = 0;
  if (!ShapeBytes(s.shape, s.dtype, &bytes)) {
    return InvalidArgumentError(Describe(s) + ": shape " + ShapeString(s.shape) + " of " +
                                std::string(DataTypeName(s.dtype)) +
                                " is larger than 2^63-1 bytes");
  }
  const bool barrier_name = s.name.rfind(kBarrierPrefix, 0) == 0;
  if (barrier_name != (s.op == OpType::kBarrier)) {
    return InvalidArgumentError(Describe(s) + ": names starting with '" + kBarrierPrefix +
                                "' are reserved for barriers");
  }
  const bool join_name = s.name.rfind(kJoinPrefix, 0) == 0;
  if (join_name != (s.op == OpType::kJoin)) {
    return InvalidArgumentError(Describe(s) + ": names starting with '" + kJoinPrefix +
                                "' are reserved for join");
  }
  const int64_t count = NumElements(s.shape);
  const bool kolo_allocates = s.op == OpType::kAllgather || s.op == OpType::kReducescatter ||
                              s.op == OpType::kAlltoall;
  if (count > 0 && !s.input) return InvalidArgumentError(Describe(s) + ": input is NULL");
  if (count > 0 && !kolo_allocates && !s.output) {
    return InvalidArgumentError(Describe(s) + ": output is NULL");
  }
  switch (s.op) {
    case OpType::kAllreduce:
      if (s.reduce_op == ReduceOp::kAdasum) {
        return UnimplementedError(Describe(s) + ": Adasum is not supported yet");
      }
      if (s.dtype == DataType::kBool && s.reduce_op == ReduceOp::kAverage) {
        return InvalidArgumentError(Describe(s) + ": Average is not defined for bool");
      }
      if (!std::isfinite(s.prescale) || !std::isfinite(s.postscale)) {
        return InvalidArgumentError(Describe(s) + ": scale factors must be finite");
      }
      if (s.dtype == DataType::kBool && (s.prescale != 1.0 || s.postscale != 1.0)) {
        return InvalidArgumentError(Describe(s) + ": scale factors must be 1 for bool");
      }
      break;
    case OpType::kAllgather:
      if (s.shape.empty()) {
        return InvalidArgumentError(Describe(s) + ": allgather needs at least one dimension");
      }
      break;
    case OpType::kBroadcast:
      if (s.root < 0 || s.root >= size) {
        return InvalidArgumentError(Describe(s) + ": root rank " + std::to_string(s.root) +
                                    " is outside [0, " + std::to_string(size) + ")");
      }
      break;
    case OpType::kReducescatter:
    case OpType::kAlltoall:
    case OpType::kBarrier:
    case OpType::kJoin:
      return ValidateOperation(s, size);
  }
  return Status::OK();
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
// path cannot do (DeviceReductionRefusal: a dtype NCCL has not, integer Average).
Status ResolveDevice(const Submission& s, Request* r) {
  int device = s.device;
  if (device == kDetectDevice) {
    device = -1;
    if (CudaBuilt() && s.input != nullptr) {
      const PointerKind in = ClassifyPointer(s.input);
      const PointerKind out = s.output != nullptr ? ClassifyPointer(s.output) : in;
      if (in.memory != out.memory || in.device != out.device) {
        return InvalidArgumentError(Describe(s) + ": input is in " + Where(in) + ", output in " +
                                    Where(out) + "; both must be in the same memory");
      }
      device = in.memory == MemoryKind::kCuda ? in.device : -1;
    }
  }
  const bool reduces = s.op == OpType::kAllreduce || s.op == OpType::kReducescatter;
  if (device >= 0 && reduces) {
    const std::string why = DeviceReductionRefusal(s.dtype, s.reduce_op);
    if (!why.empty()) {
      return InvalidArgumentError(Describe(s) + ": " + std::string(DataTypeName(s.dtype)) +
                                  " tensor on cuda:" + std::to_string(device) + ": " + why);
    }
  }
  r->device = device;
  return Status::OK();
}

}  // namespace

Status Runtime::ClaimDevice(const std::string& what, int device) {
  if (device < 0) return Status::OK();
  int mine = -1;
  if (process_device_.compare_exchange_strong(mine, device) || mine == device) {
    return Status::OK();
  }
  return InvalidArgumentError(what + ": on cuda:" + std::to_string(device) +
                              ", but this process's CUDA tensors are on cuda:" +
                              std::to_string(mine) +
                              " (its first); kolo drives one GPU per process");
}

StatusOr<std::shared_ptr<Handle>> Runtime::Enqueue(const Submission& s) {
  TensorEntry entry;
  entry.request = RequestOf(s, layout_.rank);
  Request& r = entry.request;
  Status valid = Validate(s, layout_.size);
  if (valid.ok()) valid = ResolveDevice(s, &r);
  if (valid.ok() && s.op == OpType::kAlltoall) r.splits = ResolvedSplits(s, layout_.size);
  if (valid.ok()) valid = ClaimDevice(Describe(s), r.device);
  if (valid.ok() && r.device >= 0) last_device_ = r.device;
  std::unique_lock<std::mutex> join_lock(join_mu_);
  if (!join_name_.empty()) {
    if (s.op == OpType::kJoin) {
      return FailedPreconditionError("join: rank " + std::to_string(layout_.rank) +
                                     " has already joined (one thread per rank)");
    }
    if (valid.ok()) {
      valid = FailedPreconditionError(Describe(s) + ": rank " + std::to_string(layout_.rank) +
                                      " has joined; no operation can be submitted until every "
                                      "rank has joined");
      r.refused = kRefusedJoined;
      queue_.AddRefused(r);
      join_lock.unlock();
      Wake();
      return valid;
    }
  }
  if (s.op != OpType::kJoin) join_lock.unlock();
  if (valid.ok() && r.device >= 0 && s.ready_stream != nullptr) {
    auto ev = RecordReadyEvent(r.device, s.ready_stream);
    if (ev.ok()) {
      entry.ready_event = *ev;
    } else {
      valid = Status(ev.status()).AddContext(Describe(s));
    }
  }
  if (!valid.ok()) {
    // The peers have submitted or will submit this name too: tell the coordinator, so they
    // get an error instead of waiting for this rank forever. A nameless one cannot be matched.
    if (!s.name.empty() && s.op != OpType::kJoin) {
      const std::string prefix = Describe(s) + ": ";
      r.refused = valid.message().rfind(prefix, 0) == 0 ? valid.message().substr(prefix.size())
                                                         : valid.message();
      queue_.AddRefused(r);
      Wake();
    }
    return valid;
  }
  entry.input = s.input;
  entry.output = s.output;
  entry.handle = std::make_shared<Handle>();
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

NegotiationStats Runtime::negotiation_stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

Status Runtime::Refuse(OpType op, const std::string& name, const std::string& why) {
  const bool reserved =
      name.rfind(kBarrierPrefix, 0) == 0 || name.rfind(kJoinPrefix, 0) == 0;
  if (name.empty() || reserved || op == OpType::kBarrier || op == OpType::kJoin) {
    return InvalidArgumentError("refuse: a named allreduce, allgather, broadcast, reducescatter "
                                "or alltoall is needed, not " + std::string(OpTypeName(op)) +
                                " '" + name + "'");
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
  size_t bad_index = 0;
  for (size_t i = 0; i < group.size(); ++i) {
    const Submission& s = group[i];
    Request& r = entries[i].request;
    r = RequestOf(s, layout_.rank);
    r.group = group[0].name;
    r.group_size = static_cast<int32_t>(group.size());
    Status v = s.op == op ? Validate(s, layout_.size)
                          : InvalidArgumentError(Describe(s) + ": a group holds one operation (" +
                                                 std::string(OpTypeName(op)) + ")");
    if (v.ok()) v = ResolveDevice(s, &r);
    if (v.ok()) v = ClaimDevice(Describe(s), r.device);
    if (v.ok() && r.device >= 0) last_device_ = r.device;
    if (v.ok() && r.device >= 0 && s.ready_stream != nullptr) {
      auto ev = RecordReadyEvent(r.device, s.ready_stream);
      if (ev.ok()) {
        entries[i].ready_event = *ev;
      } else {
        v = Status(ev.status()).AddContext(Describe(s));
      }
    }
    if (!v.ok() && bad.ok()) {
      bad = v;
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
        const std::string prefix = Describe(group[i]) + ": ";
        r.refused = bad.message().rfind(prefix, 0) == 0 ? bad.message().substr(prefix.size())
                                                        : bad.message();
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
    handles.push_back(e.handle);
  }
  KOLO_RETURN_IF_ERROR(queue_.AddGroup(std::move(entries)));
  Wake();
  return handles;
}

void Runtime::Wake() {
  if (!config_.wake_on_submit) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    work_arrived_ = true;
  }
  wake_.notify_one();
}

void Runtime::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_requested_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  // No more device work is enqueued; what is in flight completes its handles (or fails them).
  finaliser_.Close(kDeviceDrainTimeout, "kolo shut down");
  timeline_.Stop();
}

Status Runtime::StartTimeline(const std::string& path, bool mark_cycles) {
  if (layout_.rank != 0) return Status::OK();
  return timeline_.Start(path, mark_cycles);
}

void Runtime::FailAll(const Status& status) {
  for (TensorEntry& e : queue_.Close(status.message())) {
    if (e.handle) e.handle->Complete(status);
  }
}

void Runtime::BackgroundLoop() {
  using Clock = std::chrono::steady_clock;
  constexpr auto kSettle = std::chrono::microseconds(5);
  auto cycle_start = Clock::now();
  while (true) {
    // The configured cycle time, or the autotuner's.
    const auto cycle = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double, std::milli>(controller_.cycle_time_ms()));
    bool shutdown;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Without KOLO_WAKE_ON_SUBMIT work_arrived_ stays false: Horovod's fixed cycle.
      auto arrived = [&] { return shutdown_requested_ || work_arrived_; };
      wake_.wait_until(lock, cycle_start + cycle, arrived);
      // Woken by a submission: let a burst (one thread submitting a model's gradients, ~1 us
      // apart) finish first, so it is negotiated and fused as one rather than in fragments.
      // A timed wait would sleep far longer than the gaps (timer slack ~50 us), so this spins
      // for kSettle of quiet; a lone submission pays just that.
      const auto settle_until = Clock::now() + cycle;
      while (work_arrived_ && !shutdown_requested_ && Clock::now() < settle_until) {
        work_arrived_ = false;
        lock.unlock();
        const auto quiet_until = Clock::now() + kSettle;
        while (!work_arrived_.load(std::memory_order_relaxed) && Clock::now() < quiet_until) {
          std::this_thread::yield();  // the submitting thread may need this core
        }
        lock.lock();
      }
      work_arrived_ = false;
      shutdown = shutdown_requested_;
    }
    cycle_start = Clock::now();
    timeline_.CycleStarted();
    queue_.TakeNewRequests(&mine_, &mine_keys_);
    timeline_.Dequeued(mine_);
    auto result = [&] {
      // On rank 0, the coordinator reports each rank's Request to the timeline (ready marks).
      ScopedRequestObserver observe(timeline_.enabled() ? &timeline_ : nullptr);
      controller_.set_name_hits(timeline_.enabled());  // the timeline's rows are by name
      return controller_.Negotiate(mine_, mine_keys_, shutdown);
    }();
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      stats_ = controller_.stats();
    }
    if (!result.ok()) {
      KOLO_LOG_ERROR("runtime", "negotiation failed: {}", result.status().ToString());
      FailAll(UnavailableError("kolo stopped: " + result.status().message()));
      break;
    }
    timeline_.Negotiated(result->responses);
    for (const Response& response : result->responses) {
      timeline_.ExecutionStarted(response);
      Execute(response);
      if (!CompletesOnDevice(response)) timeline_.ExecutionFinished(response);
    }
    if (!result->fatal_error.empty()) {
      KOLO_LOG_ERROR("runtime", "{}", result->fatal_error);
      FailAll(InternalError("kolo stopped: " + result->fatal_error));
      break;
    }
    if (result->shutdown) {
      const int who = result->shutdown_rank;
      FailAll(FailedPreconditionError(
          who == layout_.rank ? "kolo has been shut down on this rank (rank " +
                                    std::to_string(who) + ")"
                              : "kolo has been shut down: rank " + std::to_string(who) +
                                    " shut down"));
      break;
    }
  }
  running_ = false;
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
    TensorEntry e = by_id ? queue_.Take(response.ids[i]) : queue_.Take(response.names[i]);
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
    for (TensorEntry& e : entries) {
      Finish(e, InternalError(std::string(OpTypeName(e.request.op)) + " '" + e.request.name +
                              "': coordinator and rank " + std::to_string(layout_.rank) +
                              " disagree on the tensors"));
    }
    return;
  }
  switch (response.type) {
    case ResponseType::kError:
      for (TensorEntry& e : entries) Finish(e, Status(response.error_code, response.error));
      return;
    case ResponseType::kAllreduce:
      ExecuteAllreduce(response, entries);
      return;
    case ResponseType::kAllgather:
      if (response.device >= 0) {
        ExecuteDeviceOutputOp(response, std::move(entries[0]));
        return;
      }
      Finish(entries[0], ExecuteAllgather(response, entries[0]));
      return;
    case ResponseType::kBroadcast:
      if (response.device >= 0) {
        ExecuteDeviceBroadcast(response, std::move(entries[0]));
        return;
      }
      Finish(entries[0], ExecuteBroadcast(response, entries[0]));
      return;
    case ResponseType::kReducescatter:
      if (response.device >= 0) {
        ExecuteDeviceOutputOp(response, std::move(entries[0]));
        return;
      }
      Finish(entries[0], ExecuteReducescatter(response, entries[0]));
      return;
    case ResponseType::kAlltoall:
      if (response.device >= 0) {
        ExecuteDeviceOutputOp(response, std::move(entries[0]));
        return;
      }
      Finish(entries[0], ExecuteAlltoall(response, entries[0]));
      return;
    case ResponseType::kBarrier: {
      Status s = data_->Barrier();
      if (entries[0].handle) {
        Finish(entries[0], s.ok() ? s : s.AddContext("barrier"));
      } else {
        // A barrier of the other ranks while this one has joined: it took part, so its next
        // barrier has the same name as theirs.
        barriers_.fetch_add(1);
        if (!s.ok()) KOLO_LOG_ERROR("runtime", "barrier while joined: {}", s.ToString());
      }
      return;
    }
    case ResponseType::kJoin:
      return;  // handled above
  }
}

void Runtime::ExecuteAllreduce(const Response& response, std::vector<TensorEntry>& entries) {
  AllreduceJob job;
  job.dtype = response.dtype;
  job.op = response.reduce_op;
  job.prescale = response.prescale;
  job.postscale = response.postscale;
  JoinedScratch scratch;  // identity buffers when this rank has joined
  bool absent = false;
  for (const TensorEntry& e : entries) absent = absent || !e.handle;
  Status status;
  if (absent && response.device < 0) {
    status = JoinedAllreduceJob(response, entries, &job, &scratch);
  } else if (!absent) {
    for (TensorEntry& e : entries) {
      job.tensors.push_back(
          FusedTensor{e.input, e.output, static_cast<size_t>(NumElements(e.request.shape))});
    }
  }
  if (response.device >= 0) {
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
      status = DeviceJoinedAllreduceJob(response, entries, device, &ready, &job, &scratch);
    }
    if (status.ok()) status = device_allreduce_.Run(*data_, selector_, device, job, ready);
    FinishAllreduceOnDevice(response, device, std::move(entries), std::move(status));
    return;
  }
  size_t count = 0;
  for (const FusedTensor& t : job.tensors) count += t.count;
  SelectionInput in = DescribeCommunicator(*data_);
  in.dtype = IsHalf(job.dtype) ? DataType::kFloat32 : job.dtype;
  in.count = count;
  in.bytes = count * DataTypeSize(in.dtype);
  in.op = job.op == ReduceOp::kAverage ? ReduceOp::kSum : job.op;
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
    status = fusion_.Run(*data_, **algorithm, job, stages ? &*stages : nullptr);
  }
  FinishAllreduce(response, entries, status);
}

void Runtime::FinishAllreduce(const Response& response, std::vector<TensorEntry>& entries,
                              Status status) {
  if (!status.ok()) {
    std::string what = "allreduce '" +
                       (entries.empty() ? response.names[0] : entries[0].request.name) + "'";
    if (entries.size() > 1) {
      what += " (fused " + std::to_string(entries.size()) + " tensors, " +
              std::to_string(ResponseBytes(response)) + " bytes)";
    }
    status.AddContext(what);
    KOLO_LOG_ERROR("runtime", "{}", status.ToString());
  }
  for (TensorEntry& e : entries) {
    if (e.handle) Finish(e, status);
  }
}

void Runtime::Finish(TensorEntry& entry, Status status) {
  DestroyReadyEvent(entry.ready_event);  // not consumed when the operation failed before it ran
  entry.ready_event = nullptr;
  timeline_.TensorFinished(entry.request, status);
  queue_.Release(entry.request);
  entry.handle->Complete(std::move(status));
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
