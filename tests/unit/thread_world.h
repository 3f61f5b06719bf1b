// The thread world (tier 1 of docs/architecture.md): N ranks as threads of this process over the
// loopback transport, so algorithms and the whole runtime run without MPI, deterministically,
// with a deadline on every wait.
#ifndef KOLO_TESTS_UNIT_THREAD_WORLD_H_
#define KOLO_TESTS_UNIT_THREAD_WORLD_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/loopback/loopback_communicator.h"
#include "runtime/runtime.h"
#include "tests/harness/submission.h"

namespace kolo::testing {

// Runs fn(comm) on `ranks` threads, one loopback communicator each, and joins them.
void RunOnThreadWorld(int ranks, const std::function<void(Communicator&)>& fn,
                      std::chrono::milliseconds deadline = std::chrono::seconds(20));

// As above, with the ranks grouped into nodes by `grouping` (a KOLO_NODE_GROUPING string, e.g.
// "1" for one node of all ranks, "2x2", "3+2"): every communicator carries a NodeContext over
// loopback local and cross worlds, so the hierarchical and shared-memory algorithms run.
void RunOnThreadWorld(int ranks, std::string_view grouping,
                      const std::function<void(Communicator&)>& fn,
                      std::chrono::milliseconds deadline = std::chrono::seconds(20));

// A host all-reduce of `shape` elements of `dtype` from `in` into `out` (equal: in place).
inline Submission HostAllreduce(std::string name, const void* in, void* out, DataType dtype,
                                std::vector<int64_t> shape, ReduceOp op) {
  Submission s = MakeSubmission(OpType::kAllreduce, std::move(name), in, out, dtype,
                                std::move(shape));
  s.reduce_op = op;
  return s;
}

// The same for `count` float32 elements, summed.
inline Submission FloatSum(std::string name, const float* in, float* out, int64_t count) {
  return HostAllreduce(std::move(name), in, out, DataType::kFloat32, {count}, ReduceOp::kSum);
}

// Default configuration with a short cycle, so tests that wait on a cycle are fast.
inline Config FastConfig() {
  Config c;
  c.cycle_time_ms = 0.5;
  return c;
}

// Cycles 30 ms apart that submissions do not start: tensors queued back to back are usually
// negotiated in one cycle (tests whose subject is what a cycle's Responses do together).
inline Config SlowCycles() {
  Config c;
  c.cycle_time_ms = 30;
  c.wake_on_submit = false;
  return c;
}

// `ranks` started Runtimes over fresh loopback control and data worlds (empty on failure).
// `grouping`: "" gives the data communicators no node context; else a node grouping as
// RunOnThreadWorld's ("1": every rank on one node that shares memory, where shm runs).
// `data_world`, when given, receives the data communicators' world (a test may Abort it: a lost
// data plane, while the control world still negotiates).
std::vector<std::unique_ptr<Runtime>> StartRuntimes(
    int ranks, const Config& config, std::string_view grouping = "",
    std::shared_ptr<LoopbackWorld>* data_world = nullptr);

// Starts `ranks` Runtimes over loopback control and data worlds, runs fn(runtime) on one
// thread per rank, then shuts them all down. `grouping` as for StartRuntimes.
void RunRuntimes(int ranks, const Config& config, const std::function<void(Runtime&)>& fn,
                 std::string_view grouping = "");

// Waits for a handle with a deadline, so a lost completion fails instead of hanging.
// KOLO_TEST_WAIT_S, when set, raises the deadline to at least that many seconds: under a tool
// that slows everything (compute-sanitizer instruments every kernel NCCL loads) a slow
// completion is not a lost one.
Status WaitFor(Handle& handle, std::chrono::milliseconds deadline = std::chrono::seconds(20));

}  // namespace kolo::testing

#endif  // KOLO_TESTS_UNIT_THREAD_WORLD_H_
