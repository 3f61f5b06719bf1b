// The C API: a thin translation from kolo.h onto the Runtime. The process holds one Runtime
// pointer (shared, so a submission racing kolo_shutdown keeps it alive until it returns).
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include <mpi.h>

#include "base/logging.h"
#include "kolo/kolo.h"
#include "runtime/mpi_world.h"
#include "runtime/runtime.h"

struct kolo_handle_s {
  std::shared_ptr<kolo::Handle> handle;
};

namespace {

std::mutex g_mu;
std::shared_ptr<kolo::Runtime> g_runtime;  // guarded by g_mu
thread_local std::string g_last_error;

std::shared_ptr<kolo::Runtime> CurrentRuntime() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_runtime;
}

kolo_status_t Fail(const kolo::Status& s) {
  g_last_error = s.message();
  return static_cast<kolo_status_t>(s.code());
}

// `splits` (alltoall): NULL, or one entry per rank, copied once the size is known.
kolo_status_t Submit(kolo::Submission sub, int ndim, const int64_t* shape,
                     kolo_handle_t* handle, const int64_t* splits = nullptr) {
  g_last_error.clear();
  if (!handle) return Fail(kolo::InvalidArgumentError("handle pointer is NULL"));
  *handle = nullptr;
  if (!sub.name.size()) {
    return Fail(kolo::InvalidArgumentError(std::string(kolo::OpTypeName(sub.op)) +
                                           ": name is NULL or empty"));
  }
  if (ndim < 0 || ndim > KOLO_MAX_DIMS || (ndim > 0 && !shape)) {
    return Fail(kolo::InvalidArgumentError(std::string(kolo::OpTypeName(sub.op)) + " '" +
                                           sub.name + "': ndim " + std::to_string(ndim) +
                                           " outside [0, " + std::to_string(KOLO_MAX_DIMS) +
                                           "] or shape is NULL"));
  }
  sub.shape.assign(shape, shape + ndim);
  auto runtime = CurrentRuntime();
  if (!runtime) {
    return Fail(kolo::FailedPreconditionError(std::string(kolo::OpTypeName(sub.op)) + " '" +
                                              sub.name + "': kolo is not initialized"));
  }
  if (splits) sub.splits.assign(splits, splits + runtime->layout().size);
  auto h = runtime->Enqueue(sub);
  if (!h.ok()) return Fail(h.status());
  *handle = new kolo_handle_s{std::move(h).value()};
  return KOLO_SUCCESS;
}

// The fields every submission has; the callers add their operation's own.
kolo::Submission NewSubmission(kolo::OpType op, const char* name, const void* input,
                               kolo_dtype_t dtype) {
  kolo::Submission sub;
  sub.op = op;
  sub.name = name ? name : "";
  sub.input = input;
  sub.dtype = static_cast<kolo::DataType>(dtype);
  return sub;
}

kolo_status_t CheckReduceOp(int op, const char* what, const char* name) {
  if (kolo::IsValidReduceOp(op)) return KOLO_SUCCESS;
  return Fail(kolo::InvalidArgumentError(std::string(what) + " '" + (name ? name : "") +
                                         "': unknown reduce op " + std::to_string(op)));
}

kolo_status_t CheckDtype(int dtype, const char* name) {
  if (!kolo::IsValidDataType(dtype)) {
    return Fail(kolo::InvalidArgumentError(std::string("'") + (name ? name : "") +
                                           "': unknown dtype " + std::to_string(dtype)));
  }
  return KOLO_SUCCESS;
}

}  // namespace

extern "C" {

kolo_status_t kolo_init(void) {
  g_last_error.clear();
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_runtime) return KOLO_SUCCESS;
  // A malformed configuration still joins the collective start-up below, so the other ranks
  // fail with it instead of waiting for this one.
  auto parsed = kolo::ConfigFromEnvironment();
  const kolo::Config config = parsed.ok() ? *parsed : kolo::Config{};
  kolo::ConfigureLogging(config.log_level, config.log_hide_time);
  auto world = kolo::AttachToMpi(static_cast<size_t>(config.fusion_chunk_bytes));
  if (!world.ok()) return Fail(world.status());
  kolo::SetLogRank(world->layout.rank, world->layout.size);
  kolo::MpiCommunicator& control = *world->control;  // owned by the runtime from here on
  auto runtime = std::make_shared<kolo::Runtime>(config, world->layout, std::move(world->control),
                                                 std::move(world->data));
  // Rank 0 opens the timeline before the ranks agree to start, so an unwritable path fails
  // kolo_init on every rank rather than leaving the others waiting for rank 0.
  kolo::Status local = parsed.status();
  if (local.ok() && !config.timeline_path.empty()) {
    local = runtime->StartTimeline(config.timeline_path, config.timeline_mark_cycles)
                .AddContext("KOLO_TIMELINE");
  }
  kolo::Status agreed = kolo::AgreeOnStart(control, local, config);
  if (!agreed.ok()) return Fail(agreed);
  kolo::Status hooked = kolo::CallBeforeMpiFinalize([] { kolo_shutdown(); });
  if (!hooked.ok()) return Fail(hooked);
  kolo::Status s = runtime->Start();
  if (!s.ok()) return Fail(s);
  KOLO_LOG_INFO("init", "kolo initialised: cycle {} ms, fusion threshold {} bytes, chunk {} bytes",
                config.cycle_time_ms, config.fusion_threshold_bytes, config.fusion_chunk_bytes);
  g_runtime = std::move(runtime);
  return KOLO_SUCCESS;
}

kolo_status_t kolo_shutdown(void) {
  std::shared_ptr<kolo::Runtime> runtime;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    runtime.swap(g_runtime);
  }
  if (runtime) runtime->Shutdown();
  return KOLO_SUCCESS;
}

int kolo_is_initialized(void) { return CurrentRuntime() ? 1 : 0; }

int kolo_mpi_threads_supported(void) {
  int initialized = 0, finalized = 0, provided = MPI_THREAD_SINGLE;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return 0;
  MPI_Query_thread(&provided);
  return provided >= MPI_THREAD_MULTIPLE ? 1 : 0;
}

#define KOLO_LAYOUT_GETTER(fn, field)         \
  int fn(void) {                              \
    auto r = CurrentRuntime();                \
    return r ? r->layout().field : -1;        \
  }
KOLO_LAYOUT_GETTER(kolo_rank, rank)
KOLO_LAYOUT_GETTER(kolo_size, size)
KOLO_LAYOUT_GETTER(kolo_local_rank, local_rank)
KOLO_LAYOUT_GETTER(kolo_local_size, local_size)
KOLO_LAYOUT_GETTER(kolo_cross_rank, cross_rank)
KOLO_LAYOUT_GETTER(kolo_cross_size, cross_size)
#undef KOLO_LAYOUT_GETTER

kolo_status_t kolo_allreduce_async(const char* name, const void* input, void* output,
                                   kolo_dtype_t dtype, int ndim, const int64_t* shape,
                                   kolo_reduce_op_t op, double prescale_factor,
                                   double postscale_factor, kolo_handle_t* handle) {
  if (kolo_status_t s = CheckDtype(dtype, name)) return s;
  if (kolo_status_t s = CheckReduceOp(op, "allreduce", name)) return s;
  kolo::Submission sub = NewSubmission(kolo::OpType::kAllreduce, name, input, dtype);
  sub.output = output;
  sub.reduce_op = static_cast<kolo::ReduceOp>(op);
  sub.prescale = prescale_factor;
  sub.postscale = postscale_factor;
  return Submit(std::move(sub), ndim, shape, handle);
}

kolo_status_t kolo_allgather_async(const char* name, const void* input, kolo_dtype_t dtype,
                                   int ndim, const int64_t* shape, kolo_handle_t* handle) {
  if (kolo_status_t s = CheckDtype(dtype, name)) return s;
  kolo::Submission sub = NewSubmission(kolo::OpType::kAllgather, name, input, dtype);
  return Submit(std::move(sub), ndim, shape, handle);
}

kolo_status_t kolo_broadcast_async(const char* name, const void* input, void* output,
                                   kolo_dtype_t dtype, int ndim, const int64_t* shape,
                                   int root_rank, kolo_handle_t* handle) {
  if (kolo_status_t s = CheckDtype(dtype, name)) return s;
  kolo::Submission sub = NewSubmission(kolo::OpType::kBroadcast, name, input, dtype);
  sub.output = output;
  sub.root = root_rank;
  return Submit(std::move(sub), ndim, shape, handle);
}

kolo_status_t kolo_reducescatter_async(const char* name, const void* input, kolo_dtype_t dtype,
                                       int ndim, const int64_t* shape, kolo_reduce_op_t op,
                                       double prescale_factor, double postscale_factor,
                                       kolo_handle_t* handle) {
  if (kolo_status_t s = CheckDtype(dtype, name)) return s;
  if (kolo_status_t s = CheckReduceOp(op, "reducescatter", name)) return s;
  kolo::Submission sub = NewSubmission(kolo::OpType::kReducescatter, name, input, dtype);
  sub.reduce_op = static_cast<kolo::ReduceOp>(op);
  sub.prescale = prescale_factor;
  sub.postscale = postscale_factor;
  return Submit(std::move(sub), ndim, shape, handle);
}

kolo_status_t kolo_alltoall_async(const char* name, const void* input, kolo_dtype_t dtype,
                                  int ndim, const int64_t* shape, const int64_t* splits,
                                  kolo_handle_t* handle) {
  if (kolo_status_t s = CheckDtype(dtype, name)) return s;
  kolo::Submission sub = NewSubmission(kolo::OpType::kAlltoall, name, input, dtype);
  return Submit(std::move(sub), ndim, shape, handle, splits);
}

kolo_status_t kolo_barrier(void) {
  g_last_error.clear();
  auto runtime = CurrentRuntime();
  if (!runtime) return Fail(kolo::FailedPreconditionError("barrier: kolo is not initialized"));
  kolo::Status s = runtime->Barrier();
  return s.ok() ? KOLO_SUCCESS : Fail(s);
}

kolo_status_t kolo_join(int* last_joined_rank) {
  g_last_error.clear();
  auto runtime = CurrentRuntime();
  if (!runtime) return Fail(kolo::FailedPreconditionError("join: kolo is not initialized"));
  kolo::StatusOr<int> last = runtime->Join();
  if (!last.ok()) return Fail(last.status());
  if (last_joined_rank) *last_joined_rank = *last;
  return KOLO_SUCCESS;
}

kolo_status_t kolo_start_timeline(const char* path, int mark_cycles) {
  g_last_error.clear();
  auto runtime = CurrentRuntime();
  if (!runtime) {
    return Fail(kolo::FailedPreconditionError("start_timeline: kolo is not initialized"));
  }
  if (!path || !*path) {
    return Fail(kolo::InvalidArgumentError("start_timeline: the path is NULL or empty"));
  }
  kolo::Status s = runtime->StartTimeline(path, mark_cycles != 0);
  return s.ok() ? KOLO_SUCCESS : Fail(s.AddContext("start_timeline"));
}

kolo_status_t kolo_stop_timeline(void) {
  g_last_error.clear();
  auto runtime = CurrentRuntime();
  if (!runtime) {
    return Fail(kolo::FailedPreconditionError("stop_timeline: kolo is not initialized"));
  }
  runtime->StopTimeline();
  return KOLO_SUCCESS;
}

int kolo_poll(kolo_handle_t handle) { return handle && handle->handle->Poll() ? 1 : 0; }

kolo_status_t kolo_wait(kolo_handle_t handle) {
  if (!handle) return KOLO_ERR_INVALID_ARGUMENT;
  return static_cast<kolo_status_t>(handle->handle->Wait().code());
}

kolo_status_t kolo_handle_status(kolo_handle_t handle) {
  if (!handle) return KOLO_ERR_INVALID_ARGUMENT;
  if (!handle->handle->Poll()) return KOLO_ERR_UNKNOWN;
  return static_cast<kolo_status_t>(handle->handle->status().code());
}

const char* kolo_handle_message(kolo_handle_t handle) {
  if (!handle || !handle->handle->Poll()) return "";
  return handle->handle->status().message().c_str();
}

kolo_status_t kolo_handle_output(kolo_handle_t handle, const void** data, int* ndim,
                                 int64_t* shape) {
  if (!handle || !data || !ndim || !shape) return KOLO_ERR_INVALID_ARGUMENT;
  kolo::Handle& h = *handle->handle;
  if (!h.Poll() || !h.status().ok() || h.output().shape.empty()) {
    return KOLO_ERR_FAILED_PRECONDITION;
  }
  *data = h.output().data.get();
  *ndim = static_cast<int>(h.output().shape.size());
  std::memcpy(shape, h.output().shape.data(), sizeof(int64_t) * h.output().shape.size());
  return KOLO_SUCCESS;
}

kolo_status_t kolo_handle_received_splits(kolo_handle_t handle, int64_t* splits) {
  if (!handle || !splits) return KOLO_ERR_INVALID_ARGUMENT;
  kolo::Handle& h = *handle->handle;
  if (!h.Poll() || !h.status().ok() || h.output().splits.empty()) {
    return KOLO_ERR_FAILED_PRECONDITION;
  }
  std::memcpy(splits, h.output().splits.data(), sizeof(int64_t) * h.output().splits.size());
  return KOLO_SUCCESS;
}

void kolo_handle_free(kolo_handle_t handle) { delete handle; }

const char* kolo_status_string(kolo_status_t status) {
  return kolo::StatusCodeName(static_cast<kolo::StatusCode>(status)).data();
}

size_t kolo_dtype_size(kolo_dtype_t dtype) {
  return kolo::IsValidDataType(dtype) ? kolo::DataTypeSize(static_cast<kolo::DataType>(dtype)) : 0;
}

const char* kolo_last_error(void) { return g_last_error.c_str(); }

}  // extern "C"
