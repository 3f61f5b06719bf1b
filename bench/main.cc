// kolo-bench: collectives through MPI and through kolo's runtime, side by side, in one run, with
// nccl-tests' flags, columns and closing lines, so scripts written for all_reduce_perf read it.
//
//   mpirun -np N kolo-bench [--collective allreduce|allgather|broadcast|reducescatter|alltoall]
//                           [-b 8] [-e 64M] [-f 4 | -i STEP] [-n 20] [-w 5] [-c 1] [-o sum]
//                           [-d float] [-r 0] [-z 0] [-a 0..3] [--paths mpi,kolo] [--json F]
//   mpirun -np N kolo-bench --model resnet50|bert-base|tiny-1000
//   mpirun -np N kolo-bench --device cuda [-b 1M -e 1G] | --device cuda --model resnet50
//   mpirun -np N kolo-bench --negotiation [--tensors 1,100,1000] [-n 200] [-w 20]
//   mpirun -np N kolo-bench -a ring,rd,...|all [--check] [-b 8] [-e 64M] [--output rows.csv]
//   mpirun -np N kolo-bench --calibrate [--output kolo_tuning.json]
//   kolo-bench --version | --help           (no mpirun needed; neither for usage errors)
//
// Sweep rows are nccl-tests' (src/common.cu): size count type redop root, then time algbw busbw
// #wrong out of place, the same in place, and one more column, the path (mpi or kolo): one row
// per size and path. Size and count follow nccl-tests' convention per collective (stats.h:
// LayoutFor; a count of 0 is a row, the empty call timed), busbw its factors (BusBwFactor). Every
// path has an in-place form (collective.h; device_sweep.cc), so every column is a number but
// #wrong with -c 0. The run ends with "# Out of bounds values : N OK|FAILED" (N: nccl-tests'
// count of rank/size/half results with any wrong element) and "# Avg bus bandwidth    : X " over
// kolo's path (out of place and in place, as nccl-tests averages both); kolo-bench's own lines
// (MPI's mean, "-c 0") follow those two. -c 0 prints N/A in #wrong.
// The collective is also taken from the executable's name: a link named all_gather_perf (or
// all_reduce_perf, broadcast_perf, reduce_scatter_perf, alltoall_perf) runs that collective.
// -a keeps kolo's meaning (algorithm list) except that a number 0..3 is nccl-tests' average mode
// (0 rank 0, 1 mean, 2 min, 3 max over ranks; the default is 1, the mean, as nccl-tests');
// --average N says the same. -g 1 and -t 1 and -m 1 are accepted (other values refused: one GPU
// and one thread per process, no aggregated calls); -z 1 puts a barrier after every timed call.
// --json FILE writes JSON Lines as rows are made (json_lines.h), in every mode but --calibrate;
// a failed write makes the exit status 1. A sweep that runs longer than 2 s shows its progress
// on rank 0's stderr when that is a terminal, not with --no-progress (harness.h: Progress).
//
// flags.cc parses and checks the command line before MPI_Init; this file sets up MPI
// (MPI_THREAD_MULTIPLE, before kolo_init, which then attaches to it) and kolo, prints the header
// and runs the chosen mode; sweep.h and replay.h say what is timed.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/logging.h"
#include "bench/algorithms.h"
#include "bench/calibrate.h"
#include "bench/device_replay.h"
#include "bench/device_sweep.h"
#include "bench/dtypes.h"
#include "bench/flags.h"
#include "bench/harness.h"
#include "bench/json_lines.h"
#include "bench/mode.h"
#include "bench/models.h"
#include "bench/negotiation.h"
#include "bench/replay.h"
#include "bench/report.h"
#include "bench/sweep.h"
#include "collectives/mpi/tcp_defaults.h"
#include "kolo/kolo.h"
#include "runtime/config.h"

extern char** environ;

namespace kolo::bench {
namespace {

std::string ThreadLevelName(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
    default:
      return "thread level " + std::to_string(level);
  }
}

// Variables mpirun sets for its own plumbing in every process: not knobs, so not in the header.
// Variables of the launcher and of kolo's own scripts, which say nothing about the run.
bool IsLauncherVariable(const std::string& entry) {
  for (const char* prefix : {"OMPI_MCA_orte_", "OMPI_MCA_ess", "OMPI_MCA_pmix",
                             "OMPI_MCA_initial_wdir", "OMPI_MCA_shmem_RUNTIME_QUERY_hint",
                             "KOLO_ROOT=", "KOLO_BUILD_"}) {
    if (entry.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

RunInfo GatherRunInfo(const World& world, int argc, char** argv, int thread_level) {
  RunInfo info;
  info.version = VersionString();
  for (int i = 0; i < argc; ++i) info.command_line += (i ? " " : "") + std::string(argv[i]);
  info.ranks = world.size;
  std::vector<char> names(static_cast<size_t>(world.size) * MPI_MAX_PROCESSOR_NAME, '\0');
  char mine[MPI_MAX_PROCESSOR_NAME] = {};
  std::strncpy(mine, world.host.c_str(), sizeof mine - 1);
  CheckMpi(world,
           MPI_Allgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(),
                         MPI_MAX_PROCESSOR_NAME, MPI_CHAR, world.comm),
           "MPI_Allgather(host names)");
  for (int r = 0; r < world.size; ++r) {
    const std::string host(&names[static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME]);
    auto it = std::find_if(info.hosts.begin(), info.hosts.end(),
                           [&](const auto& h) { return h.first == host; });
    if (it == info.hosts.end()) {
      info.hosts.emplace_back(host, 1);
    } else {
      ++it->second;
    }
  }
  info.local_size = kolo_local_size();
  info.cross_size = kolo_cross_size();
  char library[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(library, &length);
  info.mpi_library = std::string(library, std::strcspn(library, "\n,"));
  info.thread_level = ThreadLevelName(thread_level);
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    for (const char* prefix : {"KOLO_", "HOROVOD_", "MALLOC_", "OMPI_MCA_"}) {
      if (entry.rfind(prefix, 0) == 0 && !IsLauncherVariable(entry)) {
        const size_t eq = entry.find('=');
        info.env.emplace_back(entry.substr(0, eq),
                              eq == std::string::npos ? "" : entry.substr(eq + 1));
      }
    }
  }
  if (world.tcp_flags_by_kolo) {
    info.env.emplace_back("OMPI_MCA_btl_tcp_flags",
                          std::string(kOpenMpiTcpFlags) + " (kolo's default, for MPI_Init)");
  }
  std::sort(info.env.begin(), info.env.end());
  return info;
}

// Rank 0's --json file, opened on every rank's behalf: null (and no error) without --json;
// on failure every rank gets the message.
bool OpenJson(const World& world, const std::string& path, const RunInfo& info,
              std::unique_ptr<JsonLines>* json, std::string* error) {
  if (path.empty()) return true;
  *json = JsonLines::Open(world.rank == 0, path, error);
  int ok = *json != nullptr ? 1 : 0;
  CheckMpi(world, MPI_Bcast(&ok, 1, MPI_INT, 0, world.comm), "MPI_Bcast(--json opened)");
  if (ok == 0) {
    if (world.rank != 0) *error = "rank 0 cannot open '" + path + "'";
    json->reset();
    return false;
  }
  (*json)->Write(JsonLines::RunRecord(info));
  return true;
}

// Whether rank 0's --json writes all succeeded, on every rank (one broadcast).
bool JsonOk(const World& world, const JsonLines* json) {
  int ok = json == nullptr || !json->failed() ? 1 : 0;
  CheckMpi(world, MPI_Bcast(&ok, 1, MPI_INT, 0, world.comm), "MPI_Bcast(--json written)");
  return ok == 1;
}

// Returns the process's exit status.
int Main(const World& world, Config& config, int argc, char** argv, int thread_level) {
  const Flags& f = config.flags;
  auto usage_error = [&](const std::string& message) {
    if (world.rank == 0) std::fprintf(stderr, "kolo-bench: %s\n", message.c_str());
    return 2;
  };
  const std::vector<const DtypeInfo*>& dtypes = config.dtypes;
  const std::vector<const OpInfo*>& ops = config.ops;
  const Mode& mode = config.mode;
  const bool replay = mode.replay;
  const ModelLayout& model = mode.model;
  const std::vector<std::string>& paths = mode.paths;
  SweepOptions& sweep = config.sweep;
  if (CollectiveHasRoot(sweep.collective) && f.root >= world.size) {
    return usage_error("-r " + std::to_string(f.root) + ": the root must be a rank below " +
                       std::to_string(world.size));
  }
  std::unique_ptr<JsonLines> json;
  std::string json_error;

  if (f.calibrate || !f.algorithms.empty()) {
    // kolo's runtime is not started: these modes drive the algorithms (or measure the machine)
    // directly, and an idle background thread would only add noise. Its log settings apply
    // all the same, as kolo_init would apply them (hierarchical logs its phase-2 pick at debug).
    std::string shm_stores = "auto";
    if (const auto settings = ConfigFromEnvironment(); settings.ok()) {
      ConfigureLogging(settings->log_level, settings->log_hide_time);
      SetLogRank(world.rank, world.size);
      shm_stores = settings->shm_stores;
    } else if (world.rank == 0) {
      std::fprintf(stderr, "kolo-bench: kolo's settings ignored: %s\n",
                   settings.status().ToString().c_str());
    }
    const RunInfo info = GatherRunInfo(world, argc, argv, thread_level);
    if (!OpenJson(world, f.json, info, &json, &json_error))
      return usage_error("--json: " + json_error);
    Report report(world.rank == 0, world.size, stdout);
    report.Header(info);
    if (f.calibrate) {
      CalibrateOptions options;
      if (!f.output.empty()) options.output = f.output;
      options.repeats = std::max(5, f.repeats);
      options.shm_stores = shm_stores;
      return RunCalibration(world, options);
    }
    AlgorithmsOptions options;
    options.names = config.algorithms;
    options.sizes =
        SweepSizes(sweep.min_bytes, sweep.max_bytes, f.step_factor, sweep.step_bytes);
    options.iters = f.iters;
    options.warmup = f.warmup;
    options.repeats = f.repeats;
    options.check = f.check != 0;
    options.output = f.output;
    options.json = json.get();
    options.average = sweep.average;
    options.ucx = f.transport == "ucx";
    options.shm_stores = shm_stores;
    const int status = RunAlgorithms(world, options) == 0 ? 0 : 1;
    return JsonOk(world, json.get()) ? status : 1;
  }

  if (f.negotiation) {
    if (thread_level < MPI_THREAD_MULTIPLE) Fail(world, "--negotiation needs MPI_THREAD_MULTIPLE");
    NegotiationOptions options;
    options.steps = f.iters;
    options.warmup = f.warmup;
    options.tensors = config.tensors;
    const RunInfo info = GatherRunInfo(world, argc, argv, thread_level);
    if (!OpenJson(world, f.json, info, &json, &json_error))
      return usage_error("--json: " + json_error);
    options.json = json.get();
    const bool ok = RunNegotiation(world, options);
    Barrier(world);
    CheckKolo(world, kolo_shutdown(), "kolo_shutdown", nullptr, nullptr);
    return ok && JsonOk(world, json.get()) ? 0 : 1;
  }

  if (thread_level < MPI_THREAD_MULTIPLE) {
    Fail(world, "MPI provides " + ThreadLevelName(thread_level) +
                    "; kolo-bench calls MPI from the main thread while kolo's background thread "
                    "does too, so it needs MPI_THREAD_MULTIPLE");
  }
  // Without a kolo path kolo is not started: its background thread negotiates every cycle even
  // when idle, and `--paths mpi` is the clean MPI baseline.
  const bool on_device = mode.on_device;
  const bool use_kolo = (on_device && !replay) ||
                        std::find(paths.begin(), paths.end(), "kolo") != paths.end();
  if (use_kolo) CheckKolo(world, kolo_init(), "kolo_init", nullptr, nullptr);
  if (use_kolo && (kolo_size() != world.size || kolo_rank() != world.rank)) {
    Fail(world, "kolo sees rank " + std::to_string(kolo_rank()) + " of " +
                    std::to_string(kolo_size()) + ", MPI_COMM_WORLD says " +
                    std::to_string(world.rank) + " of " + std::to_string(world.size));
  }

  const RunInfo info = GatherRunInfo(world, argc, argv, thread_level);
  if (!OpenJson(world, f.json, info, &json, &json_error)) {
    if (use_kolo) CheckKolo(world, kolo_shutdown(), "kolo_shutdown", nullptr, nullptr);
    return usage_error("--json: " + json_error);
  }
  Report report(world.rank == 0, world.size, stdout);
  report.SetJson(json.get());
  report.SetChecked(f.check != 0);
  report.Header(info);
  if (!on_device && std::getenv("MALLOC_MMAP_MAX_") == nullptr) {
    report.Note(
        "malloc untuned: Open MPI's MPI_Allreduce allocates a message-sized temporary per "
        "call and slows from 32 MiB here (docs/machine-notes.md 2); for the tuned baseline "
        "rerun with MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=17179869184 "
        "MALLOC_ARENA_MAX=1");
  }
  // The sweeps combine times over ranks as -a says (nccl-tests' default, the mean); a model
  // replay takes the slowest rank's step.
  const std::string combine =
      replay ? std::string("times are the max over ranks (a step ends on its slowest rank)")
             : std::string("times are ") + RankCombineName(sweep.average) + " (-a " +
                   std::to_string(static_cast<int>(sweep.average)) + ")";
  if (!on_device) {
    report.Note(
        "mpi: half/bfloat16 through a user MPI_Op (reduced in float); avg = MPI_SUM then a "
        "division pass, timed. Paths interleaved; " +
        combine + ".");
  }
  if (!on_device && use_kolo && paths.size() > 1) {
    report.Note(
        "mpi paths run while kolo's background thread is alive (as in a job that uses "
        "both); --paths without kolo measures MPI with kolo not started");
  }
  {
    const MpiAllreducer mpi(world);
    if (replay) {
      ReplayOptions options;
      options.steps = f.iters;
      options.warmup = f.warmup;
      options.check = f.check != 0;
      options.dtype = dtypes[0];
      options.op = ops[0];
      options.paths = paths;
      if (on_device) {
        RunDeviceReplay(world, model, options, &report);
      } else {
        RunReplay(world, mpi, model, options, &report);
      }
    } else {
      const std::string z = sweep.blocking ? "; -z 1: a barrier after every call" : "";
      if (on_device) {
        report.Note(
            "allreduce on GPU buffers, out of place and in place (the buffer refilled before "
            "each block, not timed); the last column names the path (nccl: ncclAllReduce, "
            "kolo: kolo's C API on the stream); " +
            combine + z);
      } else {
        const bool owned = sweep.collective == Collective::kAllgather ||
                           sweep.collective == Collective::kReducescatter ||
                           sweep.collective == Collective::kAlltoall;
        report.Note(std::string(CollectiveName(sweep.collective)) +
                    ", out of place and in place; the last column names the path (mpi: MPI's "
                    "collective, kolo: kolo's C API)" +
                    z);
        if (owned && std::find(paths.begin(), paths.end(), "kolo") != paths.end()) {
          report.Note(
              "kolo in place: kolo returns this output in memory of its own; the timed call "
              "includes the copy back into the one buffer (nccl-tests' in-place layout)");
        }
      }
      report.Note("time: per-call mean of a block of -n " + std::to_string(f.iters) +
                  " calls, median of -R " + std::to_string(f.repeats) + " blocks");
      if (on_device) {
        RunDeviceSweep(world, sweep, &report);
      } else {
        RunSweep(world, mpi, sweep, &report);
      }
    }
  }
  report.Footer();
  Barrier(world);  // nobody shuts kolo down while a peer still has operations in flight
  if (use_kolo) CheckKolo(world, kolo_shutdown(), "kolo_shutdown", nullptr, nullptr);
  const bool json_ok = JsonOk(world, json.get());
  return report.total_wrong() == 0 && json_ok ? 0 : 1;
}

}  // namespace
}  // namespace kolo::bench

int main(int argc, char** argv) {
  kolo::bench::Config config;
  if (const int status = kolo::bench::ParseCommandLine(argc, argv, &config); status >= 0) {
    return status;  // --help, --version or a usage error: no MPI needed
  }
  // As kolo_init does when it starts MPI, so that kolo's algorithms run as an application's do
  // (MPI's own all-reduce, timed beside them, gets the same transport).
  int provided = MPI_THREAD_SINGLE;
  kolo::bench::World world;
  const bool started = [&] {
    const kolo::OpenMpiTcpDefaults tcp;
    world.tcp_flags_by_kolo = tcp.set();
    return MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) == MPI_SUCCESS;
  }();
  if (!started) {
    std::fprintf(stderr, "kolo-bench: MPI_Init_thread failed\n");
    return 1;
  }
  MPI_Comm_dup(MPI_COMM_WORLD, &world.comm);
  MPI_Comm_set_errhandler(world.comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(world.comm, &world.rank);
  MPI_Comm_size(world.comm, &world.size);
  char host[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(host, &length);
  world.host.assign(host, length);

  const int status = kolo::bench::Main(world, config, argc, argv, provided);
  MPI_Comm_free(&world.comm);
  MPI_Finalize();
  return status;
}
