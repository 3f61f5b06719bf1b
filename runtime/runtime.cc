#include "runtime/runtime.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>

#include "base/logging.h"
#include "collectives/cuda/device.h"
#include "collectives/node_context.h"
#include "fusion/planner.h"
#include "runtime/device/device_ops.h"
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
      progress_(ControllerOptionsOf(config).stall, layout.rank),
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
  // Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE=1: the hierarchical all-reduce where there are
  // several nodes to be hierarchical over, unless an algorithm is forced.
  std::string algo = config_.allreduce_algo;
  if (config_.hierarchical_allreduce && (algo.empty() || algo == "auto") && data_->node() &&
      data_->node()->map.nodes() > 1) {
    algo = "hierarchical";
  }
  selector_ = AllreduceSelector(algo, std::move(cost));
  if (algo != "auto" && !algo.empty() && !selector_.Find(algo)) {
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
  // The data plane's waits ask the progress watch (on this runtime's background thread, which
  // alone uses these communicators).
  const Communicator::ProgressCheck progress = [this](ProgressWatch::Clock::time_point since,
                                                      const std::string& waiting_for) {
    return progress_.Check(since, waiting_for, ProgressWatch::Clock::now());
  };
  data_->set_progress_check(progress);
  control_->set_progress_check(progress);
  if (NodeContext* node = data_->node()) {
    if (node->local) node->local->set_progress_check(progress);
    if (node->cross) node->cross->set_progress_check(progress);
  }
  running_ = true;
  thread_ = std::thread([this] { BackgroundLoop(); });
  return Status::OK();
}

NegotiationStats Runtime::negotiation_stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
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
  // Catching up with the peers: a rank whose cache hits still wait for its peers has nothing
  // new to wake it, yet its peers need it in the next cycle's AND (a collective) as soon as
  // they have submitted theirs; sleeping the whole cycle time would add up to that to their
  // step. So while hits wait, the next cycle starts after kCatchUp, doubling each cycle that
  // makes no progress (a peer far behind, or stalled) up to the cycle time.
  constexpr auto kCatchUp = std::chrono::microseconds(20);
  Clock::duration catch_up{0};
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
      // While catching up, a sleep (its timer slack adds ~50 us) rather than a spin: the
      // peers' submitting threads may need this core.
      wake_.wait_until(lock, cycle_start + (catch_up.count() > 0 ? catch_up : cycle), arrived);
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
    if (const uint64_t v = wait_watch_->version(); v != wait_version_seen_) {
      // A wait started or ended: what are this rank's callers blocked on now?
      wait_version_seen_ = v;
      std::vector<std::string> names;
      const bool blocked = queue_.NegotiatingNames(wait_watch_->Snapshot(), &names);
      controller_.SetWaiting(blocked, std::move(names));
    }
    auto result = [&] {
      // On rank 0, the coordinator reports each rank's Request to the timeline (ready marks).
      ScopedRequestObserver observe(timeline_.enabled() ? &timeline_ : nullptr);
      controller_.set_name_hits(timeline_.enabled());  // the timeline's rows are by name
      progress_.BeginNegotiation();
      auto negotiated = controller_.Negotiate(mine_, mine_keys_, shutdown);
      progress_.End();
      return negotiated;
    }();
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      stats_ = controller_.stats();
    }
    if (!result.ok()) {
      KOLO_LOG_ERROR("runtime", "negotiation failed: {}", result.status().ToString());
      // A transport error, a lost peer, or (the progress watch) a rank that stopped answering.
      const StatusCode code = result.status().code() == StatusCode::kDeadlineExceeded
                                  ? StatusCode::kDeadlineExceeded
                                  : StatusCode::kUnavailable;
      FailAll(Status(code, "kolo stopped: " + result.status().message()));
      break;
    }
    if (config_.wake_on_submit && controller_.has_waiting_hits()) {
      catch_up = result->responses.empty() && catch_up.count() > 0
                     ? std::min<Clock::duration>(2 * catch_up, cycle)
                     : Clock::duration(kCatchUp);
    } else {
      catch_up = Clock::duration(0);
    }
    timeline_.Negotiated(result->responses);
    for (const Response& response : result->responses) {
      timeline_.ExecutionStarted(response);
      progress_.Begin(&response);
      Execute(response);
      progress_.End();
      if (!CompletesOnDevice(response)) timeline_.ExecutionFinished(response);
    }
    if (!progress_.failure().ok()) {
      // A rank stopped answering in the data plane: nothing more can be exchanged with it.
      // What is pending fails as a later submission will (the queue is closed): kolo stopped.
      KOLO_LOG_ERROR("runtime", "{}", progress_.failure().message());
      FailAll(FailedPreconditionError("kolo stopped: " + progress_.failure().message()));
      break;
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
      Finish(e, InternalError(OpLabel(e.request.op, e.request.name) +
                              ": coordinator and rank " + std::to_string(layout_.rank) +
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
  if (job.op == ReduceOp::kAdasum) {
    // One algorithm does Adasum (submission refused the rest: other dtypes, rank counts that
    // are not powers of two, CUDA tensors), so KOLO_ALLREDUCE_ALGO, which forces how the
    // other ops reduce, does not apply.
    if (status.ok()) {
      std::optional<TimelineStages> stages;
      if (timeline_.enabled()) stages.emplace(timeline_, response.names, "ALLREDUCE (adasum)");
      status = fusion_.RunAdasum(*data_, adasum_, job, stages ? &*stages : nullptr);
    }
    FinishAllreduce(response, entries, status);
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
    progress_.set_algorithm((*algorithm)->Name());
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
