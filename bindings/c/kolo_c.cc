// The C API: a thin translation from kolo.h onto the Runtime. This file: start-up and shutdown
// (runtime/world/ does the work), the rank layout, process sets, join, the timeline, handles.
// Submissions: submit_calls.cc.
// The process holds one World pointer (api_state.h).
#include <mpi.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bindings/c/api_state.h"
#include "kolo/kolo.h"
#include "runtime/runtime.h"
#include "runtime/world/mpi_plugin.h"
#include "runtime/world/world.h"

using kolo::capi::Fail;

namespace {

using kolo::capi::CurrentWorld;
using kolo::capi::RuntimeOf;

std::shared_ptr<kolo::Runtime> CurrentRuntime() {
  auto world = CurrentWorld();
  return world ? world->global() : nullptr;
}

// kolo_shutdown, when the application finalises MPI first.
void OnMpiFinalize() { kolo_shutdown(); }

}  // namespace

extern "C" {

kolo_status_t kolo_init_with_config(const kolo_init_config_t* config) {
  kolo::capi::LastError().clear();
  // The first version of the struct ends with start_timeout_seconds.
  constexpr size_t kFirstSize = offsetof(kolo_init_config_t, start_timeout_seconds) + sizeof(double);
  if (!config || config->size < kFirstSize || config->size > sizeof(kolo_init_config_t)) {
    return Fail(kolo::InvalidArgumentError(
        "kolo_init_with_config: config is NULL or its size " +
        std::to_string(config ? config->size : 0) + " is not one this library knows (" +
        std::to_string(kFirstSize) + " to " + std::to_string(sizeof(kolo_init_config_t)) +
        "); start from KOLO_INIT_CONFIG_INIT"));
  }
  kolo_init_config_t c = KOLO_INIT_CONFIG_INIT;
  std::memcpy(&c, config, config->size);
  if (c.nranks < 0 || (c.nranks > 0 && !c.ranks)) {
    return Fail(kolo::InvalidArgumentError("kolo_init: nranks " + std::to_string(c.nranks) +
                                           " is negative or ranks is NULL"));
  }
  // NaN compares false both ways: refused with the values over the limit.
  if (!(c.start_timeout_seconds < 0 || c.start_timeout_seconds <= 1e6)) {
    return Fail(kolo::InvalidArgumentError(
        "kolo_init: start_timeout_seconds " + std::to_string(c.start_timeout_seconds) +
        " is not a number of seconds in [0, 1000000] (or < 0 for KOLO_START_TIMEOUT)"));
  }
  return kolo::capi::StartWorldOnce([&c] {
    if (c.nranks == 0) return kolo::StartWorld(OnMpiFinalize, c.start_timeout_seconds);
    return kolo::StartWorldOnRanks(std::vector<int>(c.ranks, c.ranks + c.nranks), OnMpiFinalize,
                                   c.start_timeout_seconds);
  });
}

kolo_status_t kolo_init(void) {
  const kolo_init_config_t config = KOLO_INIT_CONFIG_INIT;
  return kolo_init_with_config(&config);
}

kolo_status_t kolo_init_ranks(const int* ranks, int nranks) {
  kolo::capi::LastError().clear();
  if (nranks < 0 || (nranks > 0 && !ranks)) {
    return Fail(kolo::InvalidArgumentError("kolo_init_ranks: nranks " + std::to_string(nranks) +
                                           " is negative or ranks is NULL"));
  }
  // An empty list is no list (kolo_init_with_config would take it for every rank).
  if (nranks == 0) {
    return Fail(kolo::InvalidArgumentError("kolo_init_ranks: the list of ranks is empty"));
  }
  kolo_init_config_t config = KOLO_INIT_CONFIG_INIT;
  config.ranks = ranks;
  config.nranks = nranks;
  return kolo_init_with_config(&config);
}

kolo_status_t kolo_init_comm(MPI_Comm comm) {
  kolo::capi::LastError().clear();
  return kolo::capi::StartWorldOnce([comm] { return kolo::StartWorldOnComm(comm, OnMpiFinalize); });
}

kolo_status_t kolo_init_comm_fortran(int fortran_comm) {
  kolo::capi::LastError().clear();
  return kolo::capi::StartWorldOnce(
      [fortran_comm] { return kolo::StartWorldOnFortranComm(fortran_comm, OnMpiFinalize); });
}

kolo_status_t kolo_shutdown(void) {
  std::shared_ptr<kolo::World> world = kolo::capi::TakeWorld();
  if (world) world->Stop();
  return KOLO_SUCCESS;
}

int kolo_is_initialized(void) { return CurrentRuntime() ? 1 : 0; }

int kolo_mpi_threads_supported(void) {
  // Without an MPI library in the process MPI cannot be running; asking would load one.
  if (!kolo::MpiLibraryLoaded()) return 0;
  auto mpi = kolo::LoadMpiPlugin();
  return mpi.ok() && (*mpi)->threads_multiple() ? 1 : 0;
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

kolo_status_t kolo_barrier_on(int process_set) {
  kolo::capi::LastError().clear();
  kolo::Status why;
  auto runtime = RuntimeOf(process_set, "barrier", &why);
  if (!runtime) return Fail(why);
  kolo::Status s = runtime->Barrier();
  return s.ok() ? KOLO_SUCCESS : Fail(s);
}

kolo_status_t kolo_barrier(void) { return kolo_barrier_on(0); }

kolo_status_t kolo_add_process_set(const int* ranks, int nranks, int* process_set_id) {
  kolo::capi::LastError().clear();
  if (nranks < 0 || (nranks > 0 && !ranks) || !process_set_id) {
    // Still collective: the others must not wait in the agreement for this rank.
    if (auto world = CurrentWorld()) (void)world->process_sets().Add({-1});
    return Fail(kolo::InvalidArgumentError(
        "add_process_set: ranks is NULL, nranks is negative or process_set_id is NULL"));
  }
  auto world = CurrentWorld();
  if (!world) return Fail(kolo::FailedPreconditionError("add_process_set: kolo is not initialized"));
  auto id = world->process_sets().Add(std::vector<int>(ranks, ranks + nranks));
  if (!id.ok()) return Fail(id.status());
  *process_set_id = *id;
  return KOLO_SUCCESS;
}

kolo_status_t kolo_remove_process_set(int process_set_id) {
  kolo::capi::LastError().clear();
  auto world = CurrentWorld();
  if (!world) {
    return Fail(kolo::FailedPreconditionError("remove_process_set: kolo is not initialized"));
  }
  kolo::Status s = world->process_sets().Remove(process_set_id);
  return s.ok() ? KOLO_SUCCESS : Fail(s);
}

int kolo_process_set_rank(int process_set_id) {
  kolo::Status why;
  auto runtime = RuntimeOf(process_set_id, "process set", &why);
  return runtime ? runtime->layout().rank : -1;
}

int kolo_process_set_size(int process_set_id) {
  auto world = CurrentWorld();
  if (!world) return -1;
  auto ranks = world->process_sets().Ranks(process_set_id);
  return ranks.ok() ? static_cast<int>(ranks->size()) : -1;
}

kolo_status_t kolo_process_set_ranks(int process_set_id, int* ranks) {
  kolo::capi::LastError().clear();
  if (!ranks) return Fail(kolo::InvalidArgumentError("kolo_process_set_ranks: ranks is NULL"));
  auto world = CurrentWorld();
  if (!world) {
    return Fail(kolo::FailedPreconditionError("process set: kolo is not initialized"));
  }
  auto list = world->process_sets().Ranks(process_set_id);
  if (!list.ok()) return Fail(list.status());
  std::copy(list->begin(), list->end(), ranks);
  return KOLO_SUCCESS;
}

kolo_status_t kolo_join(int* last_joined_rank) {
  return kolo_join_on_device(KOLO_DEVICE_HOST, last_joined_rank);
}

kolo_status_t kolo_join_on_device(int device, int* last_joined_rank) {
  kolo::capi::LastError().clear();
  auto runtime = CurrentRuntime();
  if (!runtime) return Fail(kolo::FailedPreconditionError("join: kolo is not initialized"));
  if (device < KOLO_DEVICE_HOST) {
    return Fail(kolo::InvalidArgumentError("join: device " + std::to_string(device) +
                                           " is neither KOLO_DEVICE_HOST nor a CUDA ordinal"));
  }
  kolo::StatusOr<int> last = runtime->Join(device);
  if (!last.ok()) return Fail(last.status());
  if (last_joined_rank) *last_joined_rank = *last;
  return KOLO_SUCCESS;
}

kolo_status_t kolo_negotiation_stats(kolo_negotiation_stats_t* stats) {
  kolo::capi::LastError().clear();
  if (!stats) return Fail(kolo::InvalidArgumentError("kolo_negotiation_stats: stats is NULL"));
  auto runtime = CurrentRuntime();
  if (!runtime) {
    return Fail(kolo::FailedPreconditionError("kolo_negotiation_stats: kolo is not initialized"));
  }
  const kolo::NegotiationStats s = runtime->negotiation_stats();
  stats->cycles = s.cycles;
  stats->slow_cycles = s.slow_cycles;
  stats->cache_hits = s.cache_hits;
  stats->cache_misses = s.cache_misses;
  stats->cache_invalidations = s.invalidations;
  stats->negotiate_ns = s.negotiate_ns;
  stats->exchange_ns = s.exchange_ns;
  stats->fusion_threshold = s.fusion_threshold_bytes;
  stats->cycle_time_ms = s.cycle_time_ms;
  stats->autotune_done = s.autotune_done ? 1 : 0;
  return KOLO_SUCCESS;
}

kolo_status_t kolo_fusion_stats(kolo_fusion_stats_t* stats) {
  kolo::capi::LastError().clear();
  // The first version of the struct ends with fused_tensors; a later caller's larger struct
  // keeps its newer fields as they were.
  constexpr size_t kFirstSize = offsetof(kolo_fusion_stats_t, fused_tensors) + sizeof(uint64_t);
  if (!stats || stats->size < kFirstSize) {
    return Fail(kolo::InvalidArgumentError(
        "kolo_fusion_stats: stats is NULL or its size " +
        std::to_string(stats ? stats->size : 0) + " is below " + std::to_string(kFirstSize) +
        "; start from KOLO_FUSION_STATS_INIT"));
  }
  auto runtime = CurrentRuntime();
  if (!runtime) {
    return Fail(kolo::FailedPreconditionError("kolo_fusion_stats: kolo is not initialized"));
  }
  const kolo::NegotiationStats s = runtime->negotiation_stats();
  stats->fused_operations = s.fused_responses;
  stats->fused_tensors = s.fused_tensors;
  return KOLO_SUCCESS;
}

kolo_status_t kolo_start_timeline(const char* path, int mark_cycles) {
  kolo::capi::LastError().clear();
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
  kolo::capi::LastError().clear();
  auto runtime = CurrentRuntime();
  if (!runtime) {
    return Fail(kolo::FailedPreconditionError("stop_timeline: kolo is not initialized"));
  }
  runtime->StopTimeline();
  return KOLO_SUCCESS;
}

int kolo_poll(kolo_handle_t handle) { return handle && handle->handle->Poll() ? 1 : 0; }

int kolo_wait_for(kolo_handle_t handle, int64_t timeout_ms) {
  if (!handle) return 0;
  return handle->handle->WaitFor(std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 0))) ? 1
                                                                                              : 0;
}

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

kolo_status_t kolo_handle_output_device(kolo_handle_t handle, int* device) {
  if (!handle || !device) return KOLO_ERR_INVALID_ARGUMENT;
  kolo::Handle& h = *handle->handle;
  if (!h.Poll() || !h.status().ok() || h.output().shape.empty()) {
    return KOLO_ERR_FAILED_PRECONDITION;
  }
  *device = h.output().device();
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

const char* kolo_last_error(void) { return kolo::capi::LastError().c_str(); }

}  // extern "C"
