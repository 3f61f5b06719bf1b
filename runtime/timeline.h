// The timeline (Horovod's): what each tensor went through, as a Chrome trace written by rank 0
// (KOLO_TIMELINE=path.json, or Start/Stop at run time). Open it in Perfetto
// (ui.perfetto.dev) or chrome://tracing. Each tensor name is one "process" row, in order of
// first appearance; on it, as nested duration events:
//
//   NEGOTIATE_ALLREDUCE  |------------------------|           from the first sign of the tensor
//     QUEUE                  |---|                             on rank 0 (its own submission, or
//     ready marks         1        0                           a peer's Request reaching the
//                                                              coordinator) until every rank is
//                                                              ready. QUEUE: rank 0's submission
//                                                              until its background thread takes
//                                                              it. A mark (zero-length event
//                                                              named by the rank) per rank: when
//                                                              its Request reached the
//                                                              coordinator, or on a cached step
//                                                              its cache hit did (controller.h).
//   ALLREDUCE                                   |-----------------------|   the execution; args:
//     MEMCPY_IN_FUSION_BUFFER                   |--|                        dtype, shape, fused
//     ALLREDUCE (mpi)                              |--------|               tensors, error. The
//     MEMCPY_OUT_FUSION_BUFFER                              |--|            collective is named
//                                                                           by the algorithm.
//
// The memcpy activities appear only where the fused path copies (one activity per piece of
// the fusion buffer, shared by the piece's tensors); a tensor reduced in place has just the
// collective. A tensor that skips the coordinator (the response cache) negotiates from the
// first sign of it (rank 0's submission or a peer's hit) to its Response; its ready marks come
// from the ranks' hit bits, which the controller gathers to rank 0 while a timeline records:
// a rank's mark is the cycle in which rank 0 first saw its hit, as precise as the Request
// marks (one cycle). Each rank has one mark per negotiation. Barriers and joins each share one
// row ("__kolo_barrier", "__kolo_join"). KOLO_TIMELINE_MARK_CYCLES=1 adds a global instant
// event CYCLE_START at the start of every background cycle.
//
// Cost: every hook is one relaxed atomic load while the timeline is off, and negotiation sends
// nothing more; when on, events are formatted under one mutex and flushed every kFlushInterval
// (file format: trace_writer.h, always a valid JSON array), and each cycle in which a rank holds
// a cache hit gathers one bit per cache slot a rank to rank 0. The file is closed by Stop, Runtime::Shutdown and at exit.
#ifndef KOLO_RUNTIME_TIMELINE_H_
#define KOLO_RUNTIME_TIMELINE_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fusion/executor.h"
#include "runtime/negotiation/coordinator.h"
#include "protocol/message.h"
#include "runtime/trace_writer.h"

namespace kolo {

class Timeline : public RequestObserver {
 public:
  // Flushes at least this often while events come in (and on the background thread's cycles).
  static constexpr std::chrono::milliseconds kFlushInterval{20};

  Timeline() = default;
  ~Timeline() override;  // Stop()
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Creates or truncates `path` and starts recording; a running timeline is stopped first.
  // kInvalidArgument naming the path and the reason when it cannot be written.
  Status Start(const std::string& path, bool mark_cycles);
  // Ends the spans still open at the current time, flushes and closes the file. No-op when
  // stopped.
  void Stop();
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  // The hooks, in the order a tensor meets them. Any thread; no-ops while stopped.
  // Rank 0 submitted a Request (before it is queued, so Dequeued cannot come first).
  void Submitted(const Request& request);
  // The background thread took these Requests for negotiation.
  void Dequeued(const std::vector<const Request*>& requests);
  // RequestObserver: a rank's Request, or its cache hit, reached the coordinator. One mark per
  // rank per negotiation: a later one of the same rank is dropped.
  void RequestArrived(const Request& request, int rank) override;
  // Negotiation produced these Responses (error Responses end their tensors here).
  void Negotiated(const std::vector<Response>& responses);
  // Execution of one Response starts, and ends (ending the operation spans of tensors this
  // rank did not submit: it joined).
  void ExecutionStarted(const Response& response);
  void ExecutionFinished(const Response& response);
  // One tensor of the running Response completed, before its name is released.
  void TensorFinished(const Request& request, const Status& status);
  // Tensors names[first..last] of the running Response enter or leave an activity.
  void ActivityStarted(const std::vector<std::string>& names, size_t first, size_t last,
                       std::string_view activity);
  void ActivityFinished(const std::vector<std::string>& names, size_t first, size_t last);
  // A background cycle starts (marked with KOLO_TIMELINE_MARK_CYCLES); flushes when due.
  void CycleStarted();

 private:
  struct Row {
    int pid = 0;
    bool in_flight = false;    // rank 0 submitted it and it has not finished
    bool negotiating = false;  // NEGOTIATE_* open
    bool queued = false;       // QUEUE open (inside NEGOTIATE_*)
    bool running = false;      // the operation's span open
    bool activity = false;     // an activity open (inside the operation)
    // Ranks marked ready in the open negotiation: a rank's cache hit that went the slow way
    // after all (invalidated, evicted, held too long) reaches the coordinator too, and keeps
    // the first mark.
    std::vector<bool> marked;
  };

  // The row of `name` (barriers and joins: their shared row), created with its metadata
  // events on first use; Find returns nullptr instead of creating it. Under mu_.
  Row& RowOf(const std::string& name);
  Row* Find(const std::string& name);
  // One event; `ts` in nanoseconds since Start, `args` a JSON object or empty.
  void Emit(const Row& row, char phase, std::string_view name, int64_t ts,
            std::string_view args = {});
  void OpenNegotiation(Row& row, OpType op, int64_t ts);
  // Ends every span open on the row (innermost first).
  void CloseAll(Row& row, int64_t ts, std::string_view args = {});
  int64_t Now() const;  // nanoseconds since Start
  // Writes the buffered events when kFlushInterval has passed (or `force`); on a write error
  // the timeline stops, logging why.
  void FlushLocked(bool force);
  void CloseLocked();
  static void StopAllAtExit();

  std::atomic<bool> enabled_{false};
  std::mutex mu_;
  std::unique_ptr<TraceWriter> writer_;  // guarded by mu_, as everything below
  bool mark_cycles_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_flush_;
  std::unordered_map<std::string, Row> rows_;
};

// The fusion executor's stages of one allreduce Response, as activities of its tensors
// (`names` is the Response's, in the job's tensor order).
class TimelineStages : public ExecutorObserver {
 public:
  TimelineStages(Timeline& timeline, const std::vector<std::string>& names, std::string collective)
      : timeline_(timeline), names_(names), collective_(std::move(collective)) {}
  void StageStarted(Stage stage, size_t first, size_t last) override;
  void StageFinished(Stage stage, size_t first, size_t last) override;

 private:
  Timeline& timeline_;
  const std::vector<std::string>& names_;
  std::string collective_;  // "ALLREDUCE (mpi)"
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_TIMELINE_H_
