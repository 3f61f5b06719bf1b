// The C API: a thin translation from kolo.h onto the Runtime. This file: start-up and shutdown,
// the rank layout, process sets, join, the timeline, handles. Submissions: submit_calls.cc.
// The process holds one Runtime pointer (shared, so a submission racing kolo_shutdown keeps it
// alive until it returns).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <cstring>
#include <memory>
#include <mutex>
#include <type_traits>

#include <mpi.h>

#include "base/logging.h"
#include "bindings/c/api_state.h"
#include "bindings/c/process_sets.h"
#include "kolo/kolo.h"
#include "collectives/mpi/mpi_call.h"
#include "collectives/mpi/mpi_node.h"
#include "collectives/mpi/mpi_topology.h"
#include "collectives/topology_cost.h"
#include "runtime/mpi_world.h"
#include "runtime/runtime.h"

using kolo::capi::Fail;

namespace {

std::mutex g_mu;
std::shared_ptr<kolo::Runtime> g_runtime;  // guarded by g_mu

std::shared_ptr<kolo::Runtime> CurrentRuntime() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_runtime;
}

// The cost model the job's topology implies (collectives/topology_cost.h); the defaults, with a
// warning, when hwloc could not describe some node. A KOLO_TOPOLOGY_XML that a node cannot
// load sets *status (on every rank alike).
kolo::CostModel JobCostModel(MPI_Comm comm, const kolo::NodeMap& map, const kolo::Config& config,
                             kolo::Status* status) {
  auto job = kolo::ExchangeTopologies(comm, map, config.topology_xml,
                                      !config.node_grouping.empty());
  if (!job.ok()) {
    if (status->ok()) *status = job.status();
    return kolo::CostModel();
  }
  if (!job->available) {
    KOLO_LOG_WARNING("init", "no topology ({}): the cost model keeps its defaults", job->why);
    return kolo::CostModel();
  }
  auto links = kolo::BuildLinkModel(job->layout);
  if (!links.ok()) {
    KOLO_LOG_WARNING("init", "link model: {}: the cost model keeps its defaults",
                  links.status().message());
    return kolo::CostModel();
  }
  for (const std::string& note : links->notes) KOLO_LOG_DEBUG("init", "topology: {}", note);
  kolo::CostModel cost = kolo::CostModelFromLinks(*links);
  KOLO_LOG_DEBUG("init", "cost model from the topology: {}", cost.ToJson());
  return cost;
}

// KOLO_START_TIMEOUT, read before MPI starts; a malformed configuration is reported by StartOn
// (every rank then fails together), so here it means the default.
double StartTimeout() {
  auto parsed = kolo::ConfigFromEnvironment();
  return parsed.ok() ? parsed->start_timeout_seconds : kolo::Config{}.start_timeout_seconds;
}

// The MPI_COMM_WORLD ranks of `comm`'s members, ascending: the ranks kolo_init_comm's start
// waits for. Empty (the whole job) when MPI has not started or `comm` is not a usable
// intracommunicator (kolo_init_comm then refuses it).
std::vector<int> WorldRanksOf(MPI_Comm comm) {
  int initialized = 0, finalized = 0, inter = 1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized || comm == MPI_COMM_NULL) return {};
  if (MPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) return {};
  MPI_Group group, world;
  int size = 0;
  MPI_Comm_group(comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  MPI_Group_size(group, &size);
  std::vector<int> mine(static_cast<size_t>(size)), theirs(static_cast<size_t>(size));
  for (int i = 0; i < size; ++i) mine[static_cast<size_t>(i)] = i;
  MPI_Group_translate_ranks(group, size, mine.data(), world, theirs.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  std::sort(theirs.begin(), theirs.end());
  return theirs;
}

// kolo_init* after their own checks: starts kolo on `base` (collective over it; kolo keeps dups
// of it, never `base` itself). Called with g_mu held, after EnsureMpi, when not initialised.
kolo_status_t StartOn(MPI_Comm base) {
  // A malformed configuration still joins the collective start-up below, so the other ranks
  // fail with it instead of waiting for this one.
  auto parsed = kolo::ConfigFromEnvironment();
  const kolo::Config config = parsed.ok() ? *parsed : kolo::Config{};
  kolo::ConfigureLogging(config.log_level, config.log_hide_time);
  auto world = kolo::AttachToMpi(base, static_cast<size_t>(config.fusion_chunk_bytes));
  if (!world.ok()) return Fail(world.status());
  kolo::SetLogRank(world->layout.rank, world->layout.size);
  if (world->layout.rank == 0) kolo::WarnUnknownVariables();
  // Fails every rank together (a grouping that differs or does not parse), so no rank waits.
  auto node = kolo::MakeMpiNodeContext(world->data->comm(), config.node_grouping,
                                       static_cast<size_t>(config.fusion_chunk_bytes),
                                       world->data->liveness_check());
  if (!node.ok()) return Fail(kolo::Status(node.status()).AddContext("kolo_init"));
  world->data->set_node(*node);
  kolo::MpiCommunicator& control = *world->control;  // owned by the runtime from here on
  auto runtime = std::make_shared<kolo::Runtime>(config, world->layout, std::move(world->control),
                                                 std::move(world->data));
  // Rank 0 opens the timeline and checks the autotune log before the ranks agree to start, so
  // an unwritable path fails kolo_init on every rank rather than leaving the others waiting.
  kolo::Status local = parsed.status();
  std::string tuning_json;
  if (local.ok() && !config.timeline_path.empty()) {
    local = runtime->StartTimeline(config.timeline_path, config.timeline_mark_cycles)
                .AddContext("KOLO_TIMELINE");
  }
  // The cost model: every node's topology (exchanged: collective, so it runs even when this
  // rank's configuration failed), then the tuning file over it. Every rank reads the file
  // here, before the ranks agree to start, so a missing or malformed file fails every rank's
  // kolo_init instead of one rank's first all-reduce.
  kolo::CostModel cost = JobCostModel(control.comm(), (*node)->map, config, &local);
  if (local.ok() && !config.tuning_file.empty()) {
    auto loaded = kolo::CostModel::Load(config.tuning_file, cost);
    local = loaded.ok() ? kolo::Status::OK()
                        : kolo::Status(loaded.status()).AddContext("KOLO_TUNING_FILE");
    if (loaded.ok()) cost = *loaded;
  }
  tuning_json = cost.ToJson();
  if (local.ok() && config.autotune && !config.autotune_log.empty() && world->layout.rank == 0) {
    std::FILE* f = std::fopen(config.autotune_log.c_str(), "a");
    if (!f) {
      local = kolo::InvalidArgumentError("KOLO_AUTOTUNE_LOG='" + config.autotune_log +
                                         "': cannot open for writing: " + std::strerror(errno));
    } else {
      std::fclose(f);
    }
  }
  kolo::Status agreed = kolo::AgreeOnStart(control, local, config);
  if (!agreed.ok()) return Fail(agreed);
  // Every rank must pick the same algorithm for the same message.
  agreed = kolo::AgreeOnString(control.comm(), "KOLO_ALLREDUCE_ALGO", config.allreduce_algo);
  if (agreed.ok()) {
    agreed = kolo::AgreeOnString(control.comm(), "the cost model of KOLO_TUNING_FILE", tuning_json);
  }
  const std::pair<const char*, const std::string*> algos[] = {
      {"KOLO_ALLGATHER_ALGO", &config.allgather_algo},
      {"KOLO_BROADCAST_ALGO", &config.broadcast_algo},
      {"KOLO_REDUCESCATTER_ALGO", &config.reducescatter_algo},
      {"KOLO_ALLTOALL_ALGO", &config.alltoall_algo}};
  for (const auto& [knob, value] : algos) {
    if (agreed.ok()) agreed = kolo::AgreeOnString(control.comm(), knob, *value);
  }
  if (!agreed.ok()) return Fail(agreed.AddContext("kolo_init"));
  kolo::Status hooked = kolo::CallBeforeMpiFinalize([] { kolo_shutdown(); });
  if (!hooked.ok()) return Fail(hooked);
  runtime->SetCostModel(cost);
  kolo::Status s = runtime->Start();
  if (!s.ok()) return Fail(s);
  KOLO_LOG_INFO("init", "kolo initialised: cycle {} ms, fusion threshold {} bytes, chunk {} bytes",
                config.cycle_time_ms, config.fusion_threshold_bytes, config.fusion_chunk_bytes);
  kolo::capi::AttachProcessSets(std::move(world->admin), config, runtime, cost);
  g_runtime = std::move(runtime);
  return KOLO_SUCCESS;
}

}  // namespace

extern "C" {

kolo_status_t kolo_init(void) {
  kolo::capi::LastError().clear();
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_runtime) return KOLO_SUCCESS;
  kolo::Status mpi = kolo::EnsureMpi(StartTimeout());
  if (!mpi.ok()) return Fail(mpi);
  return StartOn(MPI_COMM_WORLD);
}

kolo_status_t kolo_init_ranks(const int* ranks, int nranks) {
  kolo::capi::LastError().clear();
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_runtime) return KOLO_SUCCESS;
  if (nranks < 0 || (nranks > 0 && !ranks)) {
    return Fail(kolo::InvalidArgumentError("kolo_init_ranks: nranks " + std::to_string(nranks) +
                                           " is negative or ranks is NULL"));
  }
  // The listed ranks meet (when MPI has started; MPI_Init needs every rank of the job).
  std::vector<int> listed(ranks, ranks + nranks);
  std::sort(listed.begin(), listed.end());
  listed.erase(std::unique(listed.begin(), listed.end()), listed.end());
  kolo::Status mpi = kolo::EnsureMpi(StartTimeout(), listed);
  if (!mpi.ok()) return Fail(mpi);
  auto comm = kolo::CommOfWorldRanks(std::vector<int>(ranks, ranks + nranks));
  if (!comm.ok()) return Fail(comm.status());
  MPI_Comm base = *comm;
  const kolo_status_t s = StartOn(base);
  MPI_Comm_free(&base);
  return s;
}

kolo_status_t kolo_init_comm(MPI_Comm comm) {
  kolo::capi::LastError().clear();
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_runtime) return KOLO_SUCCESS;
  kolo::Status mpi = kolo::EnsureMpi(StartTimeout(), WorldRanksOf(comm));
  if (!mpi.ok()) return Fail(mpi);
  if (comm == MPI_COMM_NULL) {
    return Fail(kolo::InvalidArgumentError(
        "kolo_init_comm: the communicator is MPI_COMM_NULL (is this rank outside the group it "
        "was made from?)"));
  }
  int inter = 0;
  const int rc = MPI_Comm_test_inter(comm, &inter);
  if (rc != MPI_SUCCESS) return Fail(kolo::MpiError(rc, "kolo_init_comm: MPI_Comm_test_inter"));
  if (inter) {
    return Fail(kolo::InvalidArgumentError(
        "kolo_init_comm: an intercommunicator was given; kolo needs an intracommunicator"));
  }
  return StartOn(comm);
}

kolo_status_t kolo_shutdown(void) {
  std::shared_ptr<kolo::Runtime> runtime;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    runtime.swap(g_runtime);
  }
  kolo::capi::DetachProcessSets();
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

kolo_status_t kolo_barrier_on(int process_set) {
  kolo::capi::LastError().clear();
  kolo::Status why;
  auto runtime = kolo::capi::ProcessSetRuntime(process_set, "barrier", &why);
  if (!runtime) return Fail(why);
  kolo::Status s = runtime->Barrier();
  return s.ok() ? KOLO_SUCCESS : Fail(s);
}

kolo_status_t kolo_barrier(void) { return kolo_barrier_on(0); }

kolo_status_t kolo_add_process_set(const int* ranks, int nranks, int* process_set_id) {
  kolo::capi::LastError().clear();
  if (nranks < 0 || (nranks > 0 && !ranks) || !process_set_id) {
    // Still collective: the others must not wait in the agreement for this rank.
    auto id = kolo::capi::AddProcessSet({-1});
    (void)id;
    return Fail(kolo::InvalidArgumentError(
        "add_process_set: ranks is NULL, nranks is negative or process_set_id is NULL"));
  }
  auto id = kolo::capi::AddProcessSet(std::vector<int>(ranks, ranks + nranks));
  if (!id.ok()) return Fail(id.status());
  *process_set_id = *id;
  return KOLO_SUCCESS;
}

kolo_status_t kolo_remove_process_set(int process_set_id) {
  kolo::capi::LastError().clear();
  kolo::Status s = kolo::capi::RemoveProcessSet(process_set_id);
  return s.ok() ? KOLO_SUCCESS : Fail(s);
}

int kolo_process_set_rank(int process_set_id) {
  kolo::Status why;
  auto runtime = kolo::capi::ProcessSetRuntime(process_set_id, "process set", &why);
  return runtime ? runtime->layout().rank : -1;
}

int kolo_process_set_size(int process_set_id) {
  auto ranks = kolo::capi::ProcessSetRanks(process_set_id);
  return ranks.ok() ? static_cast<int>(ranks->size()) : -1;
}

kolo_status_t kolo_process_set_ranks(int process_set_id, int* ranks) {
  kolo::capi::LastError().clear();
  if (!ranks) return Fail(kolo::InvalidArgumentError("kolo_process_set_ranks: ranks is NULL"));
  auto list = kolo::capi::ProcessSetRanks(process_set_id);
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
