// Starting and stopping kolo: the one place that attaches to (or starts) MPI, waits for the
// ranks at the start (start_fence.h), exchanges the nodes' topologies, builds the cost model
// from them and the tuning file, runs the start-up agreements every rank must pass together
// (mpi_world.h), starts the global Runtime and hands the process sets (process_sets.h) their
// admin communicator. The C API holds the Runtime these return, and nothing else of the job.
#include "runtime/world/world.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "base/logging.h"
#include "collectives/mpi/mpi_call.h"
#include "collectives/mpi/mpi_node.h"
#include "collectives/mpi/mpi_topology.h"
#include "collectives/topology_cost.h"
#include "runtime/config.h"
#include "runtime/world/mpi_world.h"
#include "runtime/world/process_sets.h"

namespace kolo {
namespace {

// The cost model the job's topology implies (collectives/topology_cost.h); the defaults, with a
// warning, when hwloc could not describe some node. A KOLO_TOPOLOGY_XML that a node cannot
// load sets *status (on every rank alike).
CostModel JobCostModel(MPI_Comm comm, const NodeMap& map, const Config& config,
                             Status* status) {
  auto job = ExchangeTopologies(comm, map, config.topology_xml,
                                      !config.node_grouping.empty());
  if (!job.ok()) {
    if (status->ok()) *status = job.status();
    return CostModel();
  }
  if (!job->available) {
    KOLO_LOG_WARNING("init", "no topology ({}): the cost model keeps its defaults", job->why);
    return CostModel();
  }
  auto links = BuildLinkModel(job->layout);
  if (!links.ok()) {
    KOLO_LOG_WARNING("init", "link model: {}: the cost model keeps its defaults",
                  links.status().message());
    return CostModel();
  }
  for (const std::string& note : links->notes) KOLO_LOG_DEBUG("init", "topology: {}", note);
  CostModel cost = CostModelFromLinks(*links);
  KOLO_LOG_DEBUG("init", "cost model from the topology: {}", cost.ToJson());
  return cost;
}

// The start timeout: the caller's when it gave one (>= 0), else KOLO_START_TIMEOUT, read before
// MPI starts; a malformed configuration is reported by StartOn (every rank then fails
// together), so here it means the default.
double StartTimeout(double given = -1) {
  if (given >= 0) return given;
  auto parsed = ConfigFromEnvironment();
  return parsed.ok() ? parsed->start_timeout_seconds : Config{}.start_timeout_seconds;
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

// The start-up proper, after EnsureMpi: starts kolo on `base` (collective over it; kolo keeps
// dups of it, never `base` itself).
StatusOr<std::shared_ptr<Runtime>> StartOn(MPI_Comm base, void (*on_mpi_finalize)()) {
  // A malformed configuration still joins the collective start-up below, so the other ranks
  // fail with it instead of waiting for this one.
  auto parsed = ConfigFromEnvironment();
  const Config config = parsed.ok() ? *parsed : Config{};
  ConfigureLogging(config.log_level, config.log_hide_time);
  auto world = AttachToMpi(base, static_cast<size_t>(config.fusion_chunk_bytes));
  if (!world.ok()) return (world.status());
  SetLogRank(world->layout.rank, world->layout.size);
  if (world->layout.rank == 0) WarnUnknownVariables();
  // Fails every rank together (a grouping that differs or does not parse), so no rank waits.
  auto node = MakeMpiNodeContext(world->data->comm(), config.node_grouping,
                                       static_cast<size_t>(config.fusion_chunk_bytes),
                                       world->data->liveness_check());
  if (!node.ok()) return (Status(node.status()).AddContext("kolo_init"));
  world->data->set_node(*node);
  MpiCommunicator& control = *world->control;  // owned by the runtime from here on
  auto runtime = std::make_shared<Runtime>(config, world->layout, std::move(world->control),
                                                 std::move(world->data));
  // Rank 0 opens the timeline and checks the autotune log before the ranks agree to start, so
  // an unwritable path fails kolo_init on every rank rather than leaving the others waiting.
  Status local = parsed.status();
  std::string tuning_json;
  if (local.ok() && !config.timeline_path.empty()) {
    local = runtime->StartTimeline(config.timeline_path, config.timeline_mark_cycles)
                .AddContext("KOLO_TIMELINE");
  }
  // The cost model: every node's topology (exchanged: collective, so it runs even when this
  // rank's configuration failed), then the tuning file over it. Every rank reads the file
  // here, before the ranks agree to start, so a missing or malformed file fails every rank's
  // kolo_init instead of one rank's first all-reduce.
  CostModel cost = JobCostModel(control.comm(), (*node)->map, config, &local);
  if (local.ok() && !config.tuning_file.empty()) {
    auto loaded = CostModel::Load(config.tuning_file, cost);
    local = loaded.ok() ? Status::OK()
                        : Status(loaded.status()).AddContext("KOLO_TUNING_FILE");
    if (loaded.ok()) cost = *loaded;
  }
  tuning_json = cost.ToJson();
  if (local.ok() && config.autotune && !config.autotune_log.empty() && world->layout.rank == 0) {
    std::FILE* f = std::fopen(config.autotune_log.c_str(), "a");
    if (!f) {
      local = InvalidArgumentError("KOLO_AUTOTUNE_LOG='" + config.autotune_log +
                                         "': cannot open for writing: " + std::strerror(errno));
    } else {
      std::fclose(f);
    }
  }
  Status agreed = AgreeOnStart(control, local, config);
  if (!agreed.ok()) return (agreed);
  // Every rank must pick the same algorithm for the same message.
  agreed = AgreeOnString(control.comm(), "KOLO_ALLREDUCE_ALGO", config.allreduce_algo);
  if (agreed.ok()) {
    agreed = AgreeOnString(control.comm(), "the cost model of KOLO_TUNING_FILE", tuning_json);
  }
  const std::pair<const char*, const std::string*> algos[] = {
      {"KOLO_ALLGATHER_ALGO", &config.allgather_algo},
      {"KOLO_BROADCAST_ALGO", &config.broadcast_algo},
      {"KOLO_REDUCESCATTER_ALGO", &config.reducescatter_algo},
      {"KOLO_ALLTOALL_ALGO", &config.alltoall_algo}};
  for (const auto& [knob, value] : algos) {
    if (agreed.ok()) agreed = AgreeOnString(control.comm(), knob, *value);
  }
  if (!agreed.ok()) return (agreed.AddContext("kolo_init"));
  Status hooked = CallBeforeMpiFinalize(on_mpi_finalize);
  if (!hooked.ok()) return (hooked);
  runtime->SetCostModel(cost);
  Status s = runtime->Start();
  if (!s.ok()) return (s);
  KOLO_LOG_INFO("init", "kolo initialised: cycle {} ms, fusion threshold {} bytes, chunk {} bytes",
                config.cycle_time_ms, config.fusion_threshold_bytes, config.fusion_chunk_bytes);
  AttachProcessSets(std::move(world->admin), config, runtime, cost);
  return runtime;
}

}  // namespace

StatusOr<std::shared_ptr<Runtime>> StartWorld(void (*on_mpi_finalize)(),
                                              double start_timeout_seconds) {
  KOLO_RETURN_IF_ERROR(EnsureMpi(StartTimeout(start_timeout_seconds)));
  return StartOn(MPI_COMM_WORLD, on_mpi_finalize);
}

StatusOr<std::shared_ptr<Runtime>> StartWorldOnRanks(const std::vector<int>& ranks,
                                                     void (*on_mpi_finalize)(),
                                                     double start_timeout_seconds) {
  // The listed ranks meet (when MPI has started; MPI_Init needs every rank of the job).
  std::vector<int> listed = ranks;
  std::sort(listed.begin(), listed.end());
  listed.erase(std::unique(listed.begin(), listed.end()), listed.end());
  KOLO_RETURN_IF_ERROR(EnsureMpi(StartTimeout(start_timeout_seconds), listed));
  KOLO_ASSIGN_OR_RETURN(MPI_Comm base, CommOfWorldRanks(ranks));
  auto started = StartOn(base, on_mpi_finalize);
  MPI_Comm_free(&base);
  return started;
}

StatusOr<std::shared_ptr<Runtime>> StartWorldOnComm(MPI_Comm comm, void (*on_mpi_finalize)()) {
  KOLO_RETURN_IF_ERROR(EnsureMpi(StartTimeout(), WorldRanksOf(comm)));
  if (comm == MPI_COMM_NULL) {
    return InvalidArgumentError(
        "kolo_init_comm: the communicator is MPI_COMM_NULL (is this rank outside the group it "
        "was made from?)");
  }
  int inter = 0;
  const int rc = MPI_Comm_test_inter(comm, &inter);
  if (rc != MPI_SUCCESS) return MpiError(rc, "kolo_init_comm: MPI_Comm_test_inter");
  if (inter) {
    return InvalidArgumentError(
        "kolo_init_comm: an intercommunicator was given; kolo needs an intracommunicator");
  }
  return StartOn(comm, on_mpi_finalize);
}

void StopWorld(std::shared_ptr<Runtime> global) {
  DetachProcessSets();
  if (global) global->Shutdown();
}

bool MpiThreadsMultiple() {
  int initialized = 0, finalized = 0, provided = MPI_THREAD_SINGLE;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return false;
  MPI_Query_thread(&provided);
  return provided >= MPI_THREAD_MULTIPLE;
}

}  // namespace kolo
