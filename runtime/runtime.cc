#include "runtime/runtime.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>

#include "base/broken_pipe.h"
#include "base/logging.h"
#include "base/online_cores.h"
#include "base/precise_timers.h"
#include "collectives/cuda/device.h"
#include "collectives/node_context.h"
#include "fusion/planner.h"
#include "kolo/config.h"
#include "runtime/device/device_ops.h"
#include "runtime/operations.h"

#if KOLO_WITH_NCCL
#include "collectives/nccl/nccl_comm.h"
#endif

namespace kolo {

namespace {

ControllerOptions ControllerOptionsOf(const Config& c) {
  ControllerOptions o;
  o.fusion_threshold_bytes = c.fusion_threshold_bytes;
  o.fusion_direct_bytes = PackedDirectBytes(c.fusion_direct_bytes);
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
      fusion_(static_cast<size_t>(config.fusion_chunk_bytes),
              static_cast<size_t>(PackedDirectBytes(config.fusion_direct_bytes))) {}

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
  selector_ = AllreduceSelector(algo, std::move(cost), config_.nccl_algo, config_.shm_stores);
  if (algo != "auto" && !algo.empty() && !selector_.Find(algo)) {
    // Selecting anything reports the valid names. A setting no algorithm has is a malformed
    // value (as the other *_ALGO settings' are), not an algorithm declining a message.
    return InvalidArgumentError(selector_.Select(SelectionInput()).status().message());
  }
  CollectiveNames names;
  names.allgather = config_.allgather_algo;
  names.broadcast = config_.broadcast_algo;
  names.reducescatter = config_.reducescatter_algo;
  names.alltoall = config_.alltoall_algo;
  auto choice = CollectiveChoice::Make(names);
  if (!choice.ok()) return choice.status();
  collectives_ = std::move(*choice);
  if (config_.fusion_direct_bytes == kFusionDirectAuto && HostFusionTakesLists()) {
    controller_.set_fusion_host_direct_bytes(std::numeric_limits<int64_t>::max());
  }
  KOLO_RETURN_IF_ERROR(fusion_.Prepare());
#if KOLO_WITH_NCCL
  // Making an NCCL communicator, and its first connection, wait for every rank as start does.
  SetNcclSetupTimeout(config_.start_timeout_seconds);
#endif
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
  // Born with SIGPIPE blocked: a peer's reset connection fails its write instead of killing
  // the process (base/broken_pipe.h).
  thread_ = StartThreadBlockingBrokenPipe([this] { BackgroundLoop(); });
  return Status::OK();
}

// The planner leaves tensors of kFusionDirectPackedBytes or more unfused because packing them
// into the fusion buffer and back costs two passes over them. An algorithm that takes a fused
// response's tensors in their own buffers (RunsLists: shm, on one node) packs nothing, so there
// every host tensor fuses up to the threshold (with KOLO_FUSION_DIRECT_BYTES=auto, the
// default): one run over many tensors, its pieces and barriers shared, instead of one run each.
// Asked of what the selector picks for host float32 at both ends of that range: the same
// answer on every rank, given the same communicator and settings (KOLO_ALLREDUCE_ALGO and
// KOLO_TUNING_FILE must agree across ranks anyway, or the ranks would pick different
// algorithms). Should another algorithm run a fused response after all, the executor still
// reduces its large tensors alone (FusionExecutor::Run).
bool Runtime::HostFusionTakesLists() {
  if (config_.fusion_threshold_bytes <= 0) return false;
  for (int64_t bytes : {kFusionDirectPackedBytes, config_.fusion_threshold_bytes}) {
    SelectionInput in = DescribeCommunicator(*data_);
    in.dtype = DataType::kFloat32;
    in.count = static_cast<size_t>(std::max<int64_t>(bytes, 4) / 4);
    in.bytes = in.count * 4;
    in.op = ReduceOp::kSum;
    auto algorithm = selector_.Select(in);
    if (!algorithm.ok() || !(*algorithm)->RunsLists(in.dtype)) return false;
  }
  return true;
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
  ReleaseDeviceCommunicators();
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
  // Every wait of this thread on its peers is a short sleep; see base/precise_timers.h. Where
  // this node's ranks outnumber its cores a sleep also hands the core to a peer that needs it,
  // and there the default, coarser slack stays: 4 ranks on 2 cores looked slower with 1 us
  // (docs/benchmarks.md, "Oversleeping in the negotiation").
  if (layout_.local_size <= OnlineCores()) UsePreciseTimersOnThisThread();
  constexpr auto kSettle = std::chrono::microseconds(5);
  // Catching up with the peers: a rank whose cache hits still wait for its peers has nothing
  // new to wake it, yet its peers need it in the next cycle's AND (a collective) as soon as
  // they have submitted theirs; sleeping the whole cycle time would add up to that to their
  // step. So while hits wait, the next cycle starts after kCatchUp, doubling each cycle that
  // makes no progress (a peer far behind, or stalled) up to the cycle time.
  constexpr auto kCatchUp = std::chrono::microseconds(20);
  Clock::duration catch_up{0};
  // Idle back-off: a cycle costs CPU even when there is nothing to negotiate (the exchange with
  // the peers and its polls), and on a machine with as many ranks as cores that is the
  // application's: an idle runtime at a 1 ms cycle made a CNN's compute ~16% slower on 2 cores
  // (docs/benchmarks.md, "DDP on kolo"). So while this runtime has nothing in flight and the
  // last cycles agreed nothing, each wait doubles, from the cycle time up to kIdleMax. A
  // submission still ends the wait at once (KOLO_WAKE_ON_SUBMIT), so the first operation after
  // a pause is not delayed on the rank that submits it; a peer waits for this rank in the
  // exchange only until this rank submits too, as it does now. Without wake-on-submit (Horovod's
  // fixed cycle) and under autotune (which times cycles), the cycle stays fixed.
  constexpr auto kIdleMax = std::chrono::milliseconds(20);
  constexpr int kIdleAfter = 2;  // idle cycles before the first longer wait
  const bool back_off = config_.wake_on_submit && !config_.autotune;
  int idle_cycles = 0;
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
      // While catching up, a sleep rather than a spin: the peers' submitting threads may need
      // this core.
      Clock::duration wait = catch_up.count() > 0 ? catch_up : cycle;
      if (back_off && idle_cycles > kIdleAfter) {
        const int doublings = std::min(idle_cycles - kIdleAfter, 8);
        wait = std::max<Clock::duration>(
            cycle, std::min<Clock::duration>(cycle * (1 << doublings), kIdleMax));
      }
      wake_.wait_until(lock, cycle_start + wait, arrived);
      // Woken by a submission: let a burst (one thread submitting a model's gradients, ~1 us
      // apart) finish first, so it is negotiated and fused as one rather than in fragments.
      // A timed wait would sleep far longer than the gaps (a wake-up alone costs several us),
      // so this spins for kSettle of quiet; a lone submission pays just that.
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
    // Requests of this rank that its peers have not all submitted yet wait for the next cycle:
    // cache hits, and, with the cache off, requests the coordinator holds. Either way they are
    // in flight beyond the tensors this cycle's responses answer (not executed yet). Those
    // peers submit theirs and then wait for this rank in the exchange, so catch up rather than
    // sleep the cycle time.
    const size_t in_flight = queue_.in_flight();
    size_t answered = 0;
    for (const Response& response : result->responses) answered += response.NumTensors();
    if (config_.wake_on_submit && in_flight > answered) {
      catch_up = result->responses.empty() && catch_up.count() > 0
                     ? std::min<Clock::duration>(2 * catch_up, cycle)
                     : Clock::duration(kCatchUp);
    } else {
      catch_up = Clock::duration(0);
    }
    const bool idle = mine_.empty() && result->responses.empty() && in_flight == 0;
    idle_cycles = idle ? idle_cycles + 1 : 0;
    timeline_.Negotiated(result->responses);
    for (const Response& response : result->responses) {
      timeline_.ExecutionStarted(response);
      progress_.Begin(&response);
      Execute(response);
      progress_.End();
      if (!CompletesOnDevice(response)) timeline_.ExecutionFinished(response);
      // The Responses after it stay in the queue for FailAll: see NoteOutOfStep.
      if (!progress_.failure().ok() || !out_of_step_.ok()) break;
    }
    if (!progress_.failure().ok()) {
      // A rank stopped answering in the data plane: nothing more can be exchanged with it.
      // What is pending fails as a later submission will (the queue is closed): kolo stopped.
      KOLO_LOG_ERROR("runtime", "{}", progress_.failure().message());
      FailAll(FailedPreconditionError("kolo stopped: " + progress_.failure().message()));
      break;
    }
    if (!out_of_step_.ok()) {
      KOLO_LOG_ERROR("runtime", "stopping: {}", out_of_step_.message());
      FailAll(FailedPreconditionError("kolo stopped: " + out_of_step_.message()));
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

void Runtime::NoteOutOfStep(const Status& status) {
  const StatusCode code = status.code();
  if (out_of_step_.ok() &&
      (code == StatusCode::kUnavailable || code == StatusCode::kDeadlineExceeded ||
       code == StatusCode::kResourceExhausted)) {
    out_of_step_ = status;
  }
}

void Runtime::Finish(TensorEntry& entry, Status status) {
  DestroyReadyEvent(entry.ready_event);  // not consumed when the operation failed before it ran
  entry.ready_event = nullptr;
  timeline_.TensorFinished(entry.request, status);
  queue_.Release(entry.request);
  entry.handle->Complete(std::move(status));
}

}  // namespace kolo
