// The Runtime: one per process (or one per rank of a thread world). It owns its parts —
// the tensor queue, the controller, the fusion executor, the algorithm selector and the
// background thread — and is the only object the C API points at.
//
// Threads: Enqueue* may be called from any thread. The background thread is the only one that
// enqueues on the communicators after Start(). Every handle is completed exactly once: by its
// Response, or with an error when the runtime stops. The handles of GPU work (CUDA tensors)
// complete on the finaliser's thread (runtime/finaliser.h) once kolo's stream has done the work,
// so the background thread never waits for the GPU; Finish is safe there (the timeline and the
// tensor queue lock, handles are made to be completed from another thread).
#ifndef KOLO_RUNTIME_RUNTIME_H_
#define KOLO_RUNTIME_RUNTIME_H_

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "collectives/communicator.h"
#include "collectives/host/adasum_allreduce.h"
#include "collectives/select/collective_choice.h"
#include "collectives/select/registry.h"
#include "fusion/device_allreduce.h"
#include "fusion/executor.h"
#include "runtime/config.h"
#include "runtime/finaliser.h"
#include "runtime/handle.h"
#include "runtime/negotiation/controller.h"
#include "runtime/progress_watch.h"
#include "runtime/tensor_queue.h"
#include "runtime/timeline.h"

namespace kolo {

struct RankLayout {
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;
  int cross_rank = 0, cross_size = 1;
};

// What a caller submits; `output` is ignored for allgather, reducescatter and alltoall (kolo
// allocates it), `splits` is read by alltoall only (empty: equal split).
// Submission::device when kolo is to find out from the buffers (cudaPointerGetAttributes).
inline constexpr int kDetectDevice = -2;

struct Submission {
  OpType op = OpType::kAllreduce;
  std::string name;
  const void* input = nullptr;
  void* output = nullptr;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;
  ReduceOp reduce_op = ReduceOp::kSum;
  int root = 0;
  double prescale = 1.0;
  double postscale = 1.0;
  std::vector<int64_t> splits;
  // Where input and output live: -1 host memory, >= 0 that CUDA device, kDetectDevice to ask
  // CUDA (the C API's raw pointers). Every rank must agree (negotiation checks it).
  int device = kDetectDevice;
  // For CUDA tensors, the framework's stream (cudaStream_t) whose queued work writes the input:
  // kolo's own stream waits for an event recorded on it at submission. nullptr: CUDA's legacy
  // default stream (ReadyStreamOrLegacy).
  void* ready_stream = nullptr;
};

class Runtime {
 public:
  // `control` carries negotiation, `data` the collectives; both span the same ranks.
  Runtime(Config config, RankLayout layout, std::unique_ptr<Communicator> control,
          std::unique_ptr<Communicator> data);
  ~Runtime();  // Shutdown()
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Allocates persistent buffers and starts the background thread.
  Status Start();
  // The cost model the selector uses (kolo_init builds it from the job's topology and the
  // tuning file). Without one, Start reads KOLO_TUNING_FILE over the built-in defaults.
  void SetCostModel(CostModel cost) { cost_model_ = std::move(cost); }
  // Validates locally and queues; kInvalidArgument for bad input or a name in flight,
  // kFailedPrecondition once the runtime stopped. A refused submission with a name is still
  // announced to the coordinator, which fails that name on every other rank ("rank r refused
  // it: ..."), so no peer waits for it.
  StatusOr<std::shared_ptr<Handle>> Enqueue(const Submission& s);
  // A group of allreduces, allgathers or reducescatters (one operation for all), negotiated and
  // executed all-or-nothing: queued together or not at all, and when one member fails on any
  // rank (a mismatch, a refusal) every member fails on every rank. A member refused here
  // refuses the whole group (announced to the peers like a refused Enqueue).
  StatusOr<std::vector<std::shared_ptr<Handle>>> EnqueueGroup(const std::vector<Submission>& group);
  // Announces a submission refused before Enqueue could see it (the C API's own argument checks,
  // or a binding that checks its framework's tensors itself), as Enqueue announces its own
  // refusals: the peers' same name fails ("rank r refused it: `why`") instead of waiting.
  // kInvalidArgument for an empty or reserved name, a barrier or a join.
  Status Refuse(OpType op, const std::string& name, const std::string& why);
  // Blocks until every rank has entered Barrier() or joined: a negotiated operation under the reserved
  // name "__kolo_barrier.<n>" (n counts this rank's barriers), so it is ordered with the
  // others. One thread per rank at a time.
  Status Barrier();
  // Horovod's join: this rank has run out of data. Blocks until every rank has joined and
  // returns the rank that joined last. Meanwhile the other ranks' allreduces proceed with this
  // rank contributing the reduction's identity (zeros for Sum and Average, which still divides
  // by the full size; the largest value / +inf for Min, the lowest / -inf for Max, 1 for
  // Product; bool: false for Sum and Max, true for Min and Product), and their barriers
  // include this rank; any other operation that needs this rank fails on its submitters. Submissions on this rank are refused until the
  // join completes (kFailedPrecondition), and announced so the peers' same names fail rather
  // than wait. Negotiated under the reserved name "__kolo_join.<n>". One thread per rank.
  // `device` (Horovod's join(device)): the CUDA device for this rank's identity in device
  // all-reduces while it is joined; -1 lets JoinedDevice choose.
  StatusOr<int> Join(int device = -1);
  // Asks every rank to stop, waits for the background thread, fails what is still pending,
  // waits for the GPU work in flight (failing what is still running after
  // kDeviceDrainTimeout), closes the timeline.
  void Shutdown();
  // How long Shutdown waits for GPU work still in flight before it aborts it and fails its
  // handles. All ranks ran the same work, so healthy work finishes well within it; only a peer
  // stuck without dying keeps it running.
  static constexpr std::chrono::seconds kDeviceDrainTimeout{30};

  // The timeline (runtime/timeline.h), written by rank 0 only: on the other ranks Start is a
  // no-op returning OK. Start opens (truncates) `path`, closing a running timeline first;
  // kInvalidArgument when it cannot be written. Any thread, not collective.
  Status StartTimeline(const std::string& path, bool mark_cycles);
  void StopTimeline() { timeline_.Stop(); }

  const RankLayout& layout() const { return layout_; }
  // The controller's counters as of the last completed cycle.
  NegotiationStats negotiation_stats() const;
  const Config& config() const { return config_; }

 private:
  // Starts the next cycle early (KOLO_WAKE_ON_SUBMIT).
  void Wake();
  void BackgroundLoop();
  // runtime/executor.cc: takes the Response's tensors from the queue and runs them through
  // the runner RunnerFor picks by (operation, memory kind).
  void Execute(const Response& response);
  using Runner = void (*)(Runtime& runtime, const Response& response,
                          std::vector<TensorEntry>& entries);
  // nullptr when no runner does `type` on that memory (kJoin: Execute runs it itself).
  static Runner RunnerFor(ResponseType type, bool on_device);
  // `entries` in the Response's order; an entry without a handle is a tensor this rank never
  // submitted because it has joined: it takes part with the identity (runtime/join.cc).
  // Completes every entry's handle with `status`; a failure is logged, and each handle's error
  // names its own tensor. Returns the failure as logged (named by the group's first tensor).
  Status FinishAllreduce(const Response& response, std::vector<TensorEntry>& entries,
                         Status status);
  void ExecuteAllreduce(const Response& response, std::vector<TensorEntry>& entries);
  void ExecuteDeviceAllreduce(const Response& response, std::vector<TensorEntry>& entries);
  void ExecuteBarrier(TensorEntry& entry);
  void ExecuteJoin(const Response& response);
  // The device a joined rank reduces its identity on, for a device all-reduce it never
  // submitted: its own. That is the device given to Join, else the device of its last CUDA
  // submission to this runtime (its NCCL communicator for these ranks is there); a rank that
  // did neither uses the submitters' device (response.device: negotiation makes every
  // submitter give the same ordinal, so it names this rank's GPU in the usual one-visible-GPU
  // or device-per-local-rank set-ups alike).
  // One process drives one GPU, the device of its first CUDA tensor; kInvalidArgument (the
  // reason alone, as runtime/validate.h's) for a tensor on another. Ranks agree only on host vs
  // GPU memory, and each runs a fused group of CUDA tensors on its own device, so a second GPU
  // in one process would let a group that fuses on every rank be refused on one of them only
  // (its peers waiting in NCCL).
  Status ClaimDevice(int device);
  // runtime/submit.cc: what Enqueue checks before queueing `s` (ValidateSubmission, where its
  // memory is, ClaimDevice), filling r's device and splits; a refusal is the reason alone.
  Status Admit(const Submission& s, Request* r);
  int JoinedDevice(const Response& response) const {
    const int given = join_device_.load(), last = last_device_.load();
    return given >= 0 ? given : last >= 0 ? last : response.device;
  }
  Status ExecuteAllgather(const Response& response, TensorEntry& entry);
  Status ExecuteBroadcast(const Response& response, TensorEntry& entry);
  // runtime/device/runtime_device.cc: CUDA tensors. Their work is enqueued on kolo's stream, and the
  // handles complete through the finaliser when the GPU is done (`enqueued`: the outcome of
  // enqueueing; an error still waits for whatever part of the work was enqueued).
  // `device`: where this rank's work ran (its own device when it joined).
  void FinishAllreduceOnDevice(const Response& response, int device,
                               std::vector<TensorEntry> entries, Status enqueued);
  void ExecuteDeviceBroadcast(const Response& response, TensorEntry entry);
  // Allgather, alltoall and reducescatter of a CUDA tensor (runtime/device/device_ops.h): the output
  // kolo allocates goes to the handle in the finaliser's callback, once the GPU has written it.
  void ExecuteDeviceOutputOp(const Response& response, TensorEntry entry);
  void CompleteOnDevice(int device, Status enqueued, Finaliser::Callback finish);
  // Aborts the NCCL communicators made for this runtime's communicators (data, and the node's
  // local and cross ones) and destroys its kolo streams: at shutdown, once no device work is in
  // flight.
  void ReleaseDeviceCommunicators();
  // True for the Responses whose completion the finaliser owns (their timeline spans end
  // there, in TensorFinished).
  static bool CompletesOnDevice(const Response& response);
  // runtime/operations.cc
  Status ExecuteReducescatter(const Response& response, TensorEntry& entry);
  Status ExecuteAlltoall(const Response& response, TensorEntry& entry);
  void FailAll(const Status& status);
  // Called on the background thread with the outcome of each host collective it runs. A
  // failure that leaves this rank out of step with its peers is kept in out_of_step_, and the
  // background loop stops after that Response: kUnavailable (a peer is gone, or gave up on the
  // collective), kDeadlineExceeded (a peer stopped answering) and kResourceExhausted (this rank
  // could not allocate what the collective needs, so its peers run it without this rank).
  // Going on would run the next collective against a peer still in this one (a wrong result)
  // or wait on a peer that is gone, once per Response. Other failures (a refusal every rank
  // makes alike) leave the ranks in step. Device collectives keep their own rules: a failed
  // NCCL communicator is aborted and later device collectives of its set fail saying so, while
  // host collectives go on (NCCL's set-up errors reach every rank alike). Execute sets
  // out_of_step_ itself where this rank skips a Response its peers run (it disagrees with the
  // coordinator on the tensors: a bug, kInternal).
  void NoteOutOfStep(const Status& status);
  // Whether fused host responses run in their tensors' own buffers (Start: then every host
  // tensor may fuse; runtime.cc says why).
  bool HostFusionTakesLists();
  // Frees the entry's name, then completes its handle: once a caller sees completion, the name
  // can be submitted again.
  void Finish(TensorEntry& entry, Status status);
  // Finish for a host collective's outcome, on the background thread (NoteOutOfStep first).
  void FinishHost(TensorEntry& entry, Status status) {
    NoteOutOfStep(status);
    Finish(entry, std::move(status));
  }

  const Config config_;
  const RankLayout layout_;
  std::unique_ptr<Communicator> control_;
  std::unique_ptr<Communicator> data_;
  Controller controller_;
  // The data plane's stall inspector: kolo's algorithms ask it while a transfer waits long.
  ProgressWatch progress_;
  Status out_of_step_;  // see NoteOutOfStep; background thread only
  FusionExecutor fusion_;
  DeviceAllreduce device_allreduce_;  // CUDA tensors (fusion/device_allreduce.h)
  AllreduceSelector selector_;
  // ReduceOp::kAdasum on host tensors: its own algorithm, not chosen by the selector.
  AdasumAllreduce adasum_;
  std::optional<CostModel> cost_model_;
  CollectiveChoice collectives_;  // all-gather, broadcast, reduce-scatter, all-to-all
  TensorQueue queue_;
  // The handles callers are blocked on, and what the background thread last made of them: the
  // names they wait for, told to the controller for the deadlock check.
  std::shared_ptr<WaitWatch> wait_watch_ = std::make_shared<WaitWatch>();
  uint64_t wait_version_seen_ = ~uint64_t{0};
  std::vector<const Request*> mine_;  // background thread: this cycle's new Requests (in queue_)
  std::vector<RequestKey> mine_keys_;  // and their keys
  Timeline timeline_;

  std::mutex mu_;
  std::condition_variable wake_;
  bool shutdown_requested_ = false;  // guarded by mu_
  // A submission since the last cycle; written under mu_ (for the condition variable), read
  // without it while settling.
  std::atomic<bool> work_arrived_{false};
  std::thread thread_;
  std::atomic<bool> running_{false};
  std::atomic<uint64_t> barriers_{0};
  std::atomic<uint64_t> joins_{0};
  // The name of this rank's pending join ("" when it has not joined). Guarded by join_mu_,
  // which is held while a join or a refused submission is queued, so the coordinator sees
  // them in the order this rank decided them.
  std::mutex join_mu_;
  std::string join_name_;
  std::atomic<int> last_joined_{-1};  // set before the join's handle completes
  std::atomic<int> last_device_{-1};  // the CUDA device of this rank's last device submission
  // The one GPU this process drives: its first CUDA tensor's (ClaimDevice).
  std::atomic<int> process_device_{-1};
  std::atomic<int> join_device_{-1};  // the device given to the pending (or last) Join
  mutable std::mutex stats_mu_;
  NegotiationStats stats_;  // guarded by stats_mu_: a copy of controller_.stats()
  // Last, so it is destroyed first: its callbacks use the queue, the timeline and the handles,
  // its probes the data communicator. Closed by Shutdown.
  Finaliser finaliser_;
};

// The reserved name prefix of Runtime::Barrier; refused for every other operation.
inline constexpr char kBarrierPrefix[] = "__kolo_barrier.";
// The reserved name prefix of Runtime::Join; refused for every other operation.
inline constexpr char kJoinPrefix[] = "__kolo_join.";

}  // namespace kolo

#endif  // KOLO_RUNTIME_RUNTIME_H_
