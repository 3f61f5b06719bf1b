// Starting and stopping kolo over a Bootstrap (bootstrap.h): the transports, the start fence
// (mpi_bootstrap.h's, before MPI starts), the nodes' topologies, the cost model from them and the
// tuning file, the start-up agreements every rank must pass together (agreements.h), the global
// Runtime and the process-set table.
#include "runtime/world/world.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "base/logging.h"
#include "collectives/cuda/device.h"
#include "collectives/select/topology_cost.h"
#include "collectives/topology_exchange.h"
#include "runtime/config.h"
#include "runtime/world/agreements.h"
#include "runtime/world/env_bootstrap.h"
#include "runtime/world/mpi_plugin.h"
#include "runtime/world/ucx_bootstrap.h"

namespace kolo {
namespace {

// The cost model the job's topology implies (collectives/select/topology_cost.h); the defaults, with a
// warning, when hwloc could not describe some node. A KOLO_TOPOLOGY_XML that a node cannot
// load sets *status (on every rank alike).
CostModel JobCostModel(const GatherAll& gather_all, int rank, const NodeMap& map,
                       const Config& config, Status* status) {
  auto job = ExchangeTopologies(gather_all, rank, map, config.topology_xml,
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

}  // namespace

StatusOr<std::shared_ptr<World>> World::Start(std::unique_ptr<Bootstrap> bootstrap,
                                              const StatusOr<Config>& parsed,
                                              void (*on_external_stop)()) {
  // A malformed configuration still joins the collective start-up below, so the other ranks
  // fail with it instead of waiting for this one.
  const Config config = parsed.ok() ? *parsed : Config{};
  ConfigureLogging(config.log_level, config.log_hide_time);
  auto transports = bootstrap->Connect(config);
  if (!transports.ok()) return transports.status();
  const RankLayout layout = transports->layout;
  SetLogRank(layout.rank, layout.size);
  if (layout.rank == 0) WarnUnknownVariables();
  auto runtime = std::make_shared<Runtime>(config, layout, std::move(transports->control),
                                           std::move(transports->data));
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
  const GatherAll gather_all = [b = bootstrap.get()](const std::string& mine,
                                                     std::vector<std::string>* all) {
    return b->AllgatherBytes(mine, all);
  };
  CostModel cost = JobCostModel(gather_all, layout.rank, transports->nodes, config, &local);
  if (local.ok() && !config.tuning_file.empty()) {
    auto loaded = CostModel::Load(config.tuning_file, cost);
    local = loaded.ok() ? Status::OK()
                        : Status(loaded.status()).AddContext("KOLO_TUNING_FILE");
    if (loaded.ok()) cost = *loaded;
  }
  tuning_json = cost.ToJson();
  if (local.ok() && config.autotune && !config.autotune_log.empty() && layout.rank == 0) {
    std::FILE* f = std::fopen(config.autotune_log.c_str(), "a");
    if (!f) {
      local = InvalidArgumentError("KOLO_AUTOTUNE_LOG='" + config.autotune_log +
                                         "': cannot open for writing: " + std::strerror(errno));
    } else {
      std::fclose(f);
    }
  }
  Status agreed = AgreeOnStart(*bootstrap, local, config);
  if (!agreed.ok()) return (agreed);
  // Every rank must pick the same algorithm for the same message.
  agreed = AgreeOnString(gather_all, "KOLO_ALLREDUCE_ALGO", config.allreduce_algo);
  if (agreed.ok()) {
    agreed = AgreeOnString(gather_all, "the cost model of KOLO_TUNING_FILE", tuning_json);
  }
  const std::pair<const char*, const std::string*> algos[] = {
      {"KOLO_ALLGATHER_ALGO", &config.allgather_algo},
      {"KOLO_BROADCAST_ALGO", &config.broadcast_algo},
      {"KOLO_REDUCESCATTER_ALGO", &config.reducescatter_algo},
      {"KOLO_ALLTOALL_ALGO", &config.alltoall_algo},
      // What NCCL runs is part of the device all-reduce's prediction.
      {"NCCL_ALGO", &config.nccl_algo}};
  for (const auto& [knob, value] : algos) {
    if (agreed.ok()) agreed = AgreeOnString(gather_all, knob, *value);
  }
  if (!agreed.ok()) return (agreed.AddContext("kolo_init"));
  Status hooked = bootstrap->CallBeforeExternalStop(on_external_stop);
  if (!hooked.ok()) return (hooked);
  runtime->SetCostModel(cost);
  Status s = runtime->Start();
  if (!s.ok()) return (s);
  // A GPU machine whose driver is older than kolo's statically linked CUDA runtime sees no
  // device: every CUDA tensor would fail as "no such device". Say why once, here.
  if (const std::string old = CudaDriverTooOld(); !old.empty()) {
    KOLO_LOG_WARNING("init", "CUDA tensors cannot be used: {}", old);
  }
  KOLO_LOG_INFO("init", "kolo initialised: cycle {} ms, fusion threshold {} bytes, chunk {} bytes",
                config.cycle_time_ms, config.fusion_threshold_bytes, config.fusion_chunk_bytes);
  std::shared_ptr<World> world(new World());
  world->sets_ = std::make_unique<ProcessSets>(bootstrap.get(), config, runtime, cost);
  world->bootstrap_ = std::move(bootstrap);
  world->global_ = std::move(runtime);
  return world;
}

World::~World() { Stop(); }

void World::Stop() {
  if (sets_) sets_->Stop();
  if (global_) global_->Shutdown();
}

namespace {

// The start timeout: the caller's when it gave one (>= 0), else KOLO_START_TIMEOUT; a malformed
// configuration is reported by World::Start (every rank then fails together), so here it means
// the default.
double StartTimeout(const StatusOr<Config>& parsed, double given = -1) {
  if (given >= 0) return given;
  return parsed.ok() ? parsed->start_timeout_seconds : Config{}.start_timeout_seconds;
}

// The Bootstrap of KOLO_TRANSPORT over the MPI one (which has checked that every rank names
// the same transport before either diverges).
StatusOr<std::unique_ptr<Bootstrap>> WithTransport(StatusOr<std::unique_ptr<Bootstrap>> mpi,
                                                   const StatusOr<Config>& parsed) {
  if (!mpi.ok() || !parsed.ok() || parsed->transport != "ucx") return mpi;
  if (!UcxTransportBuilt()) {
    return FailedPreconditionError(
        "kolo_init: KOLO_TRANSPORT=ucx, but this kolo was built without UCX (KOLO_WITH_UCX=OFF "
        "or libucx-dev missing when it was configured)");
  }
  return UcxBootstrapOver(std::move(*mpi));
}

// kolo_init_ranks and kolo_init_comm name MPI ranks: meaningless in a job started without MPI,
// where MPI would start as a world of one and wait for nobody.
Status RefuseWithoutMpi(const char* call) {
  if (!EnvStartRequested()) return Status::OK();
  return FailedPreconditionError(
      std::string(call) +
      ": this process was started without MPI (RANK, WORLD_SIZE, "
      "MASTER_ADDR and MASTER_PORT set, no MPI launcher), so there are no MPI ranks to choose "
      "from; start with kolo_init and use process sets for a subset of the ranks");
}

}  // namespace

StatusOr<std::shared_ptr<World>> StartWorld(void (*on_mpi_finalize)(),
                                            double start_timeout_seconds) {
  const auto parsed = ConfigFromEnvironment();
  // Started by torchrun-style variables, not by an MPI launcher: no MPI at all.
  if (EnvStartRequested()) {
    KOLO_ASSIGN_OR_RETURN(auto bootstrap,
                          EnvBootstrap(StartTimeout(parsed, start_timeout_seconds)));
    return World::Start(std::move(bootstrap), parsed, on_mpi_finalize);
  }
  KOLO_ASSIGN_OR_RETURN(const MpiPlugin* mpi, LoadMpiPlugin());
  KOLO_ASSIGN_OR_RETURN(
      auto bootstrap,
      WithTransport(mpi->on_world(StartTimeout(parsed, start_timeout_seconds)), parsed));
  return World::Start(std::move(bootstrap), parsed, on_mpi_finalize);
}

StatusOr<std::shared_ptr<World>> StartWorldOnRanks(const std::vector<int>& ranks,
                                                   void (*on_mpi_finalize)(),
                                                   double start_timeout_seconds) {
  const auto parsed = ConfigFromEnvironment();
  KOLO_RETURN_IF_ERROR(RefuseWithoutMpi("kolo_init_ranks"));
  KOLO_ASSIGN_OR_RETURN(const MpiPlugin* mpi, LoadMpiPlugin());
  KOLO_ASSIGN_OR_RETURN(
      auto bootstrap,
      WithTransport(mpi->on_ranks(ranks, StartTimeout(parsed, start_timeout_seconds)), parsed));
  return World::Start(std::move(bootstrap), parsed, on_mpi_finalize);
}

StatusOr<std::shared_ptr<World>> StartWorldOnFortranComm(int fortran_comm,
                                                         void (*on_mpi_finalize)()) {
  KOLO_RETURN_IF_ERROR(RefuseWithoutMpi("kolo_init_comm"));
  KOLO_ASSIGN_OR_RETURN(const MpiPlugin* mpi, LoadMpiPlugin());
  KOLO_ASSIGN_OR_RETURN(MPI_Comm comm, mpi->comm_from_fortran(fortran_comm));
  return StartWorldOnComm(comm, on_mpi_finalize);
}

StatusOr<std::shared_ptr<World>> StartWorldOnComm(MPI_Comm comm, void (*on_mpi_finalize)()) {
  const auto parsed = ConfigFromEnvironment();
  KOLO_RETURN_IF_ERROR(RefuseWithoutMpi("kolo_init_comm"));
  KOLO_ASSIGN_OR_RETURN(const MpiPlugin* mpi, LoadMpiPlugin());
  KOLO_ASSIGN_OR_RETURN(auto bootstrap,
                        WithTransport(mpi->on_comm(comm, StartTimeout(parsed)), parsed));
  return World::Start(std::move(bootstrap), parsed, on_mpi_finalize);
}

}  // namespace kolo
