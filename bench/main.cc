// kolo-bench: all-reduce through MPI and through kolo's runtime, side by side, in one run.
//
//   mpirun -np N kolo-bench [-b 8] [-e 64M] [-f 4] [-n 20] [-w 5] [-c 1] [-o sum] [-d float]
//   mpirun -np N kolo-bench --model resnet50|bert-base|tiny-1000
//   mpirun -np N kolo-bench --device cuda [-b 1M -e 1G] | --device cuda --model resnet50
//   mpirun -np N kolo-bench --negotiation [--tensors 1,100,1000] [-n 200] [-w 20]
//   mpirun -np N kolo-bench -a ring,rd,...|all [--check] [-b 8] [-e 64M] [--output rows.csv]
//   mpirun -np N kolo-bench --calibrate [--output kolo_tuning.json]
//
// Flags and columns follow nccl-tests (all_reduce_perf); sweep.h and replay.h say what is timed.
// This file parses the flags, sets up MPI (MPI_THREAD_MULTIPLE, before kolo_init, which then
// attaches to it) and kolo, prints the header and runs the sweep or the model replay.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/algorithms.h"
#include "bench/calibrate.h"
#include "bench/device_replay.h"
#include "bench/device_sweep.h"
#include "bench/dtypes.h"
#include "bench/harness.h"
#include "bench/mode.h"
#include "bench/models.h"
#include "bench/negotiation.h"
#include "bench/replay.h"
#include "bench/report.h"
#include "bench/sweep.h"
#include "kolo/kolo.h"

extern char** environ;

namespace kolo::bench {
namespace {

struct Flags {
  std::string min_bytes = "8";
  std::string max_bytes = "64M";
  std::string step_bytes;
  double step_factor = 4;
  int iters = 20;
  int warmup = 5;
  int repeats = 5;
  int check = 1;
  std::string op = "sum";
  std::string dtype = "float";
  std::string paths;
  std::string model;
  std::string json;
  bool negotiation = false;
  std::string tensors = "1,100,1000";
  std::string algorithms;
  bool calibrate = false;
  std::string device = "host";
  std::string output;
};

// "8", "64K", "64M", "1G", "1GB" (binary units, like nccl-tests). False on anything else.
bool ParseBytes(std::string text, int64_t* bytes) {
  if (text.empty()) return false;
  if (text.size() > 1 && (text.back() == 'B' || text.back() == 'b')) text.pop_back();
  int shift = 0;
  switch (std::toupper(static_cast<unsigned char>(text.back()))) {
    case 'K':
      shift = 10;
      break;
    case 'M':
      shift = 20;
      break;
    case 'G':
      shift = 30;
      break;
    default:
      break;
  }
  if (shift != 0) text.pop_back();
  if (text.empty() || !std::all_of(text.begin(), text.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c)) != 0;
      })) {
    return false;
  }
  const long long value = std::stoll(text);
  if (value > (INT64_MAX >> shift)) return false;
  *bytes = static_cast<int64_t>(value) << shift;
  return true;
}

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
  info.version = std::to_string(KOLO_VERSION_MAJOR) + "." + std::to_string(KOLO_VERSION_MINOR) +
                 "." + std::to_string(KOLO_VERSION_PATCH);
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
  std::sort(info.env.begin(), info.env.end());
  return info;
}

// Returns the process's exit status.
int Main(const World& world, int argc, char** argv, int thread_level) {
  Flags f;
  CLI::App app{
      "kolo-bench: all-reduce through MPI_Allreduce and through kolo's runtime, side by side "
      "(nccl-tests' flags and columns). Run under mpirun."};
  app.add_option("-b,--minbytes", f.min_bytes, "smallest size (8, 64K, 64M)")
      ->capture_default_str();
  app.add_option("-e,--maxbytes", f.max_bytes, "largest size")->capture_default_str();
  app.add_option("-i,--stepbytes", f.step_bytes, "linear step between sizes (instead of -f)");
  app.add_option("-f,--stepfactor", f.step_factor, "size multiplier between sizes")
      ->capture_default_str();
  app.add_option("-n,--iters", f.iters, "timed calls per block (sweep) / timed steps (--model)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("-w,--warmup_iters", f.warmup, "warmup calls (sweep) / steps (--model)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("-R,--repeats", f.repeats, "timed blocks per size and path; the median is shown")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("-c,--check", f.check, "check every output element (0/1; --check alone: 1)")
      ->capture_default_str()
      ->expected(0, 1)
      ->default_str("1")
      ->check(CLI::Range(0, 1));
  app.add_option("-o,--op", f.op, "sum|prod|min|max|avg|all")->capture_default_str();
  app.add_option("-d,--datatype", f.dtype, DtypeNameList() + "|all")->capture_default_str();
  app.add_option("--paths", f.paths,
                 "comma list; sweep: mpi,kolo (default both); --model: "
                 "kolo,mpi-per-tensor,mpi-fused, with --device cuda kolo,nccl-per-tensor,"
                 "nccl-fused (default all)");
  std::string model_help = "replay a model's gradients:";
  for (const std::string& m : ModelNames()) model_help += " " + m;
  app.add_option("--model", f.model, model_help);
  app.add_option("--json", f.json, "write every row to this JSON file (rank 0)");
  app.add_flag("--negotiation", f.negotiation,
               "negotiation cost per cycle, response cache on and off (bench/negotiation.h)");
  app.add_option("--tensors", f.tensors, "--negotiation: tensors per step, comma list")
      ->capture_default_str();
  std::string algorithm_names;
  for (const std::string& name : RegisteredAlgorithmNames()) algorithm_names += name + ",";
  app.add_option("-a,--algorithms", f.algorithms,
                 "compare all-reduce algorithms with MPI_Allreduce, float32 sum (" +
                     algorithm_names + "all; bench/algorithms.h)");
  app.add_option("--device", f.device,
                 "where the buffers live: host (default) or cuda (one GPU per rank; sweep: "
                 "paths nccl and kolo, bench/device_sweep.h; --model: bench/device_replay.h). "
                 "-d stays nccl-tests' datatype")
      ->check(CLI::IsMember({"host", "cuda"}))
      ->capture_default_str();
  app.add_flag("--calibrate", f.calibrate,
               "measure the cost model's parameters and write a tuning file (bench/calibrate.h)");
  app.add_option("--output", f.output,
                 "-a: write the rows as CSV; --calibrate: the tuning file (kolo_tuning.json)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (world.rank == 0) return app.exit(e);
    return e.get_exit_code();
  }

  auto usage_error = [&](const std::string& message) {
    if (world.rank == 0) std::fprintf(stderr, "kolo-bench: %s\n", message.c_str());
    return 2;
  };
  std::vector<const DtypeInfo*> dtypes;
  for (const std::string& name :
       f.dtype == "all" ? std::vector<std::string>{} : SplitCommas(f.dtype)) {
    const DtypeInfo* d = ParseDtype(name);
    if (d == nullptr) return usage_error("unknown -d '" + name + "'; one of " + DtypeNameList());
    dtypes.push_back(d);
  }
  if (f.dtype == "all") {
    for (const DtypeInfo& d : Dtypes()) dtypes.push_back(&d);
  }
  std::vector<const OpInfo*> ops;
  for (const std::string& name : f.op == "all" ? std::vector<std::string>{} : SplitCommas(f.op)) {
    const OpInfo* o = ParseOp(name);
    if (o == nullptr) return usage_error("unknown -o '" + name + "'; sum|prod|min|max|avg|all");
    ops.push_back(o);
  }
  if (f.op == "all") {
    for (const OpInfo& o : Ops()) ops.push_back(&o);
  }
  if (dtypes.empty() || ops.empty()) return usage_error("-d and -o need at least one value");

  ModeFlags mode_flags;
  mode_flags.device = f.device;
  mode_flags.model = f.model;
  mode_flags.negotiation = f.negotiation;
  mode_flags.paths = f.paths;
  Mode mode;
  if (const std::string bad = ChooseMode(mode_flags, &mode); !bad.empty()) {
    return usage_error(bad);
  }
  const bool replay = mode.replay;
  const ModelLayout& model = mode.model;
  const std::vector<std::string>& paths = mode.paths;
  if (replay && (dtypes.size() != 1 || ops.size() != 1)) {
    return usage_error("--model takes one -d and one -o");
  }

  SweepOptions sweep;
  if (!ParseBytes(f.min_bytes, &sweep.min_bytes))
    return usage_error("bad -b '" + f.min_bytes + "'");
  if (!ParseBytes(f.max_bytes, &sweep.max_bytes))
    return usage_error("bad -e '" + f.max_bytes + "'");
  if (!f.step_bytes.empty() && !ParseBytes(f.step_bytes, &sweep.step_bytes)) {
    return usage_error("bad -i '" + f.step_bytes + "'");
  }
  if (sweep.step_bytes == 0 && f.step_factor <= 1.0 && sweep.min_bytes != sweep.max_bytes) {
    return usage_error("-f must be > 1 (or give -i)");
  }

  if (f.calibrate || !f.algorithms.empty()) {
    // kolo's runtime is not started: these modes drive the algorithms (or measure the machine)
    // directly, and an idle background thread would only add noise.
    if (f.calibrate && !f.algorithms.empty()) return usage_error("-a and --calibrate: one of them");
    const RunInfo info = GatherRunInfo(world, argc, argv, thread_level);
    Report report(world.rank == 0, world.size, stdout);
    report.Header(info);
    if (f.calibrate) {
      CalibrateOptions options;
      if (!f.output.empty()) options.output = f.output;
      options.repeats = std::max(5, f.repeats);
      return RunCalibration(world, options);
    }
    AlgorithmsOptions options;
    const std::vector<std::string> known = RegisteredAlgorithmNames();
    for (const std::string& name : SplitCommas(f.algorithms)) {
      if (name != "all" && std::find(known.begin(), known.end(), name) == known.end()) {
        return usage_error("unknown -a '" + name + "'; one of " + algorithm_names + "all");
      }
      options.names.push_back(name);
    }
    if (options.names.empty()) return usage_error("-a is empty");
    if (dtypes.size() != 1 || dtypes[0]->kolo != KOLO_FLOAT32 || ops.size() != 1 ||
        ops[0]->name != "sum") {
      return usage_error("-a measures float32 sum only (-d float -o sum)");
    }
    options.sizes =
        SweepSizes(sweep.min_bytes, sweep.max_bytes, f.step_factor, sweep.step_bytes);
    options.iters = f.iters;
    options.warmup = f.warmup;
    options.repeats = f.repeats;
    options.check = f.check != 0;
    options.output = f.output;
    return RunAlgorithms(world, options) == 0 ? 0 : 1;
  }

  if (f.negotiation) {
    if (thread_level < MPI_THREAD_MULTIPLE) Fail(world, "--negotiation needs MPI_THREAD_MULTIPLE");
    NegotiationOptions options;
    options.steps = f.iters;
    options.warmup = f.warmup;
    options.tensors.clear();
    for (const std::string& t : SplitCommas(f.tensors)) {
      if (t.empty() || t.size() > 7 || !std::all_of(t.begin(), t.end(), ::isdigit) || std::stoi(t) < 1) {
        return usage_error("bad --tensors entry '" + t + "' (1 to 9999999)");
      }
      options.tensors.push_back(std::stoi(t));
    }
    if (options.tensors.empty()) return usage_error("--tensors is empty");
    const bool ok = RunNegotiation(world, options);
    Barrier(world);
    CheckKolo(world, kolo_shutdown(), "kolo_shutdown", nullptr, nullptr);
    return ok ? 0 : 1;
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
  Report report(world.rank == 0, world.size, stdout);
  report.Header(info);
  if (!on_device && std::getenv("MALLOC_MMAP_MAX_") == nullptr) {
    report.Note(
        "malloc untuned: Open MPI's MPI_Allreduce allocates a message-sized temporary per "
        "call and slows from 32 MiB here (docs/machine-notes.md 2); for the tuned baseline "
        "rerun with MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=17179869184 "
        "MALLOC_ARENA_MAX=1");
  }
  if (!on_device) {
    report.Note(
        "mpi: half/bfloat16 through a user MPI_Op (reduced in float); avg = MPI_SUM then a "
        "division pass, timed. Paths interleaved; times are the max over ranks.");
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
      sweep.step_factor = f.step_factor;
      sweep.iters = f.iters;
      sweep.warmup = f.warmup;
      sweep.repeats = f.repeats;
      sweep.check = f.check != 0;
      sweep.dtypes = dtypes;
      sweep.ops = ops;
      sweep.paths = paths;
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
  if (!f.json.empty()) {
    std::string error;
    if (!report.WriteJson(f.json, info, &error)) Fail(world, "--json: " + error);
  }
  Barrier(world);  // nobody shuts kolo down while a peer still has operations in flight
  if (use_kolo) CheckKolo(world, kolo_shutdown(), "kolo_shutdown", nullptr, nullptr);
  return report.total_wrong() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace kolo::bench

int main(int argc, char** argv) {
  int provided = MPI_THREAD_SINGLE;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "kolo-bench: MPI_Init_thread failed\n");
    return 1;
  }
  kolo::bench::World world;
  MPI_Comm_dup(MPI_COMM_WORLD, &world.comm);
  MPI_Comm_set_errhandler(world.comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(world.comm, &world.rank);
  MPI_Comm_size(world.comm, &world.size);
  char host[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(host, &length);
  world.host.assign(host, length);

  const int status = kolo::bench::Main(world, argc, argv, provided);
  MPI_Comm_free(&world.comm);
  MPI_Finalize();
  return status;
}
