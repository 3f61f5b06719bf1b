#include "bench/flags.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "bench/algorithms.h"
#include "kolo/kolo.h"

namespace kolo::bench {
namespace {

// The launcher's rank variables: under mpirun every process parses the same command line, and
// only the one that will be rank 0 prints (all exit alike). No variable: a lone process prints.
bool PrintsHere() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* value = std::getenv(name)) return std::string(value) == "0";
  }
  return true;
}

int UsageError(const std::string& message) {
  if (PrintsHere()) {
    std::fprintf(stderr, "kolo-bench: %s\n", message.c_str());
    std::fflush(stderr);
  }
  return 2;
}

// --layout: the model's tensors as JSON Lines on stdout, for scripts that replay the same
// gradients through another API (bench/gradient_set.py).
int PrintLayout(const std::string& name) {
  ModelLayout model;
  if (!ModelByName(name, &model)) {
    return UsageError("--layout takes --model NAME, one of " + ModelNamesText() +
                      (name.empty() ? "" : " (got '" + name + "')"));
  }
  if (!PrintsHere()) return 0;
  for (const TensorSpec& t : model.tensors) {
    std::printf("%s\n", nlohmann::json{{"name", t.name}, {"shape", t.shape}}.dump().c_str());
  }
  return std::fflush(stdout) == 0 && !std::ferror(stdout) ? 0 : 1;
}

bool IsDigits(const std::string& text) {
  return !text.empty() && text.size() <= 9 && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
}

// CLI11's message on one line.
std::string OneLine(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

}  // namespace

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
  if (text.empty() || text.size() > 18 || !std::all_of(text.begin(), text.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c)) != 0;
      })) {
    return false;
  }
  const long long value = std::stoll(text);
  if (value > (INT64_MAX >> shift)) return false;
  *bytes = static_cast<int64_t>(value) << shift;
  return true;
}

std::string VersionString() {
  return std::to_string(KOLO_VERSION_MAJOR) + "." + std::to_string(KOLO_VERSION_MINOR) + "." +
         std::to_string(KOLO_VERSION_PATCH);
}

int ParseCommandLine(int argc, char** argv, Config* config) {
  Flags& f = config->flags;
  Collective collective = Collective::kAllreduce;
  const bool named = argc > 0 && CollectiveFromProgramName(argv[0], &collective);
  CLI::App app{
      "kolo-bench: collectives through MPI and through kolo's runtime, side by side, out of "
      "place and in place (nccl-tests' flags and columns). Run under mpirun."};
  app.add_flag("--version", f.version, "print kolo-bench's version and exit");
  app.add_option("--collective", f.collective,
                 CollectiveNameList() +
                     " (default allreduce, or the one an all_gather_perf-style name asks for)");
  app.add_option("-b,--minbytes", f.min_bytes, "smallest size (8, 64K, 64M)")
      ->capture_default_str();
  app.add_option("-e,--maxbytes", f.max_bytes, "largest size")->capture_default_str();
  app.add_option("-i,--stepbytes", f.step_bytes, "linear step between sizes (instead of -f)");
  app.add_option("-f,--stepfactor", f.step_factor, "size multiplier between sizes (>= 2)")
      ->capture_default_str();
  app.add_option("-n,--iters", f.iters, "timed calls per block (sweep) / timed steps (--model)")
      ->capture_default_str();
  app.add_option("-w,--warmup_iters", f.warmup, "warmup calls (sweep) / steps (--model)")
      ->capture_default_str();
  app.add_option("-R,--repeats", f.repeats, "timed blocks per size and path; the median is shown")
      ->capture_default_str();
  app.add_option("-c,--check", f.check, "check every output element (0/1; --check alone: 1)")
      ->capture_default_str()
      ->expected(0, 1)
      ->default_str("1");
  app.add_option("-o,--op", f.op, "sum|prod|min|max|avg|all")->capture_default_str();
  app.add_option("-d,--datatype", f.dtype, DtypeNameList() + "|all")->capture_default_str();
  app.add_option("-r,--root", f.root, "broadcast's root rank")->capture_default_str();
  app.add_option("-z,--blocking", f.blocking, "1: a barrier after every timed call (nccl-tests')")
      ->capture_default_str();
  app.add_option(
      "--average", f.average,
      "timings over ranks: 0 rank 0, 1 mean, 2 min, 3 max (default 1, as nccl-tests; also "
      "-a 0..3)");
  app.add_option("-g,--ngpus", f.ngpus, "GPUs per process: 1 only (one rank per GPU)")
      ->capture_default_str();
  app.add_option("-t,--nthreads", f.nthreads, "threads per process: 1 only (one rank each)")
      ->capture_default_str();
  app.add_option("-m,--agg_iters", f.agg_iters, "aggregated calls per iteration: 1 only")
      ->capture_default_str();
  app.add_option("--paths", f.paths,
                 "comma list; sweep: mpi,kolo (default both); --model: "
                 "kolo,mpi-per-tensor,mpi-fused,memcpy, with --device cuda kolo,nccl-per-tensor,"
                 "nccl-fused (default all)");
  app.add_option("--model", f.model, "replay a model's gradients: " + ModelNamesText());
  app.add_flag("--layout", f.layout,
               "with --model: print its tensors, one JSON object per line ({\"name\", "
               "\"shape\"}, registration order), and exit (no MPI needed; bench/gradient_set.py "
               "reads it)");
  app.add_flag("--no-progress", f.no_progress,
               "no progress line on stderr (shown only when stderr is a terminal)");
  app.add_option("--json", f.json,
                 "write a JSON Lines record per row to this file as the run goes (rank 0)");
  app.add_flag("--negotiation", f.negotiation,
               "negotiation cost per cycle, response cache on and off (bench/negotiation.h)");
  app.add_option("--tensors", f.tensors, "--negotiation: tensors per step, comma list")
      ->capture_default_str();
  std::string algorithm_names;
  for (const std::string& name : RegisteredAlgorithmNames()) algorithm_names += name + ",";
  app.add_option("-a,--algorithms", f.algorithms,
                 "compare all-reduce algorithms with MPI_Allreduce, float32 sum (" +
                     algorithm_names +
                     "all; bench/algorithms.h); a number 0..3 is nccl-tests' -a (--average)");
  app.add_option("--transport", f.transport,
                 "-a: mpi (kolo's algorithms over MPI point-to-point), or ucx (each again over "
                 "UCX's tag API, beside the MPI rows)")
      ->capture_default_str();
  app.add_option("--device", f.device,
                 "where the buffers live: host (default) or cuda (one GPU per rank; sweep: "
                 "paths nccl and kolo, bench/device_sweep.h; --model: bench/device_replay.h). "
                 "-d stays nccl-tests' datatype")
      ->capture_default_str();
  app.add_flag("--calibrate", f.calibrate,
               "measure the cost model's parameters and write a tuning file (bench/calibrate.h)");
  app.add_option("--output", f.output,
                 "-a: write the rows as CSV; --calibrate: the tuning file (kolo_tuning.json)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    if (PrintsHere()) std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    if (PrintsHere()) std::printf("%s", app.help("", CLI::AppFormatMode::All).c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    return UsageError(OneLine(e.what()) + " (kolo-bench --help lists the flags)");
  }
  if (f.version) {
    if (PrintsHere()) std::printf("kolo-bench %s\n", VersionString().c_str());
    return 0;
  }
  if (f.layout) return PrintLayout(f.model);

  // nccl-tests' flags that only make sense with several GPUs or threads per process.
  if (f.ngpus != 1 || f.nthreads != 1) {
    return UsageError(std::string(f.ngpus != 1 ? "-g " + std::to_string(f.ngpus)
                                               : "-t " + std::to_string(f.nthreads)) +
                      ": kolo-bench runs one GPU and one thread per process; launch more ranks "
                      "instead (mpirun -np N)");
  }
  if (f.agg_iters != 1) {
    return UsageError("-m " + std::to_string(f.agg_iters) +
                      ": kolo-bench times one collective per call (no aggregated iterations); "
                      "-m 1 only");
  }
  if (f.blocking != 0 && f.blocking != 1) return UsageError("-z takes 0 or 1");
  if (f.iters < 1) return UsageError("-n must be at least 1 (got " + std::to_string(f.iters) + ")");
  if (f.warmup < 0)
    return UsageError("-w must be 0 or more (got " + std::to_string(f.warmup) + ")");
  if (f.repeats < 1) {
    return UsageError("-R must be at least 1 (got " + std::to_string(f.repeats) + ")");
  }
  if (f.check < 0) return UsageError("-c takes 0 or 1 (got " + std::to_string(f.check) + ")");
  if (f.root < 0) return UsageError("-r must be a rank (got " + std::to_string(f.root) + ")");
  if (f.device != "host" && f.device != "cuda") {
    return UsageError("--device '" + f.device + "': host or cuda");
  }

  // -a: nccl-tests' average mode when a number 0..3, else kolo's algorithm list.
  int average = f.average;
  if (average != -1 && (average < 0 || average > 3)) {
    return UsageError("--average takes 0 (rank 0), 1 (mean), 2 (min) or 3 (max)");
  }
  if (IsDigits(f.algorithms)) {
    const int a = std::stoi(f.algorithms);
    if (a > 3) {
      return UsageError("-a " + f.algorithms +
                        ": a number is nccl-tests' average mode, 0 (rank 0), 1 (mean), 2 (min) "
                        "or 3 (max); algorithm names: " +
                        algorithm_names + "all");
    }
    if (average != -1 && average != a)
      return UsageError("-a " + f.algorithms + " and --average " + std::to_string(average) +
                        " disagree");
    average = a;
    f.algorithms.clear();
  }
  config->sweep.average = average == -1 ? RankCombine::kAverage : static_cast<RankCombine>(average);

  if (!f.collective.empty() && !ParseCollective(f.collective, &collective)) {
    return UsageError("unknown --collective '" + f.collective + "'; one of " +
                      CollectiveNameList());
  }
  const bool other_collective = collective != Collective::kAllreduce;
  config->sweep.collective = collective;
  config->sweep.root = f.root;
  config->sweep.blocking = f.blocking == 1;

  for (const std::string& name :
       f.dtype == "all" ? std::vector<std::string>{} : SplitCommas(f.dtype)) {
    const DtypeInfo* d = ParseDtype(name);
    if (d == nullptr) return UsageError("unknown -d '" + name + "'; one of " + DtypeNameList());
    config->dtypes.push_back(d);
  }
  if (f.dtype == "all") {
    for (const DtypeInfo& d : Dtypes()) config->dtypes.push_back(&d);
  }
  for (const std::string& name : f.op == "all" ? std::vector<std::string>{} : SplitCommas(f.op)) {
    const OpInfo* o = ParseOp(name);
    if (o == nullptr) return UsageError("unknown -o '" + name + "'; sum|prod|min|max|avg|all");
    config->ops.push_back(o);
  }
  if (f.op == "all") {
    for (const OpInfo& o : Ops()) config->ops.push_back(&o);
  }
  if (config->dtypes.empty() || config->ops.empty()) {
    return UsageError("-d and -o need at least one value");
  }
  // Like nccl-tests, collectives without a reduction ignore -o.
  if (!CollectiveReduces(collective)) config->ops = {ParseOp("sum")};

  ModeFlags mode_flags;
  mode_flags.device = f.device;
  mode_flags.model = f.model;
  mode_flags.negotiation = f.negotiation;
  mode_flags.paths = f.paths;
  if (const std::string bad = ChooseMode(mode_flags, &config->mode); !bad.empty()) {
    return UsageError(bad);
  }
  const bool sweep_mode =
      !config->mode.replay && !f.negotiation && !f.calibrate && f.algorithms.empty();
  if ((named || other_collective) && !sweep_mode) {
    return UsageError(std::string("--collective ") + CollectiveName(collective) +
                      " is for the size sweep (not --model, --negotiation, -a NAMES or "
                      "--calibrate)");
  }
  if (other_collective && config->mode.on_device) {
    return UsageError(std::string("--device cuda measures allreduce only, not ") +
                      CollectiveName(collective));
  }
  const std::vector<std::string>& paths = config->mode.paths;
  if (collective == Collective::kReducescatter &&
      std::find(paths.begin(), paths.end(), "kolo") != paths.end()) {
    for (const OpInfo* o : config->ops) {
      if (o->kolo != KOLO_OP_SUM && o->kolo != KOLO_OP_AVERAGE) {
        return UsageError("-o " + std::string(o->name) +
                          ": kolo's reducescatter does sum and avg only (or --paths mpi)");
      }
    }
  }
  if (config->mode.replay && (config->dtypes.size() != 1 || config->ops.size() != 1)) {
    return UsageError("--model takes one -d and one -o");
  }

  SweepOptions& sweep = config->sweep;
  if (!ParseBytes(f.min_bytes, &sweep.min_bytes)) return UsageError("bad -b '" + f.min_bytes + "'");
  if (!ParseBytes(f.max_bytes, &sweep.max_bytes)) return UsageError("bad -e '" + f.max_bytes + "'");
  if (!f.step_bytes.empty() &&
      (!ParseBytes(f.step_bytes, &sweep.step_bytes) || sweep.step_bytes == 0)) {
    return UsageError("bad -i '" + f.step_bytes + "' (a size above 0)");
  }
  if (sweep.min_bytes > sweep.max_bytes) {
    return UsageError("-b " + f.min_bytes + " is larger than -e " + f.max_bytes);
  }
  if (sweep.step_bytes == 0 && !(f.step_factor >= 2) && sweep.min_bytes != sweep.max_bytes) {
    return UsageError("-f must be 2 or more (or give -i for linear steps)");
  }
  if (sweep.step_bytes == 0 && sweep.min_bytes == 0 && sweep.max_bytes > 0) {
    // 0 times -f stays 0: nccl-tests would print size 0 forever.
    return UsageError(
        "-b 0 with -f: 0 times the factor stays 0; start at -b 1 or more, give "
        "-i for linear steps, or -e 0 for the size 0 alone");
  }
  sweep.step_factor = f.step_factor;
  sweep.iters = f.iters;
  sweep.warmup = f.warmup;
  sweep.repeats = f.repeats;
  sweep.check = f.check != 0;
  sweep.progress = !f.no_progress;
  sweep.dtypes = config->dtypes;
  sweep.ops = config->ops;
  sweep.paths = paths;

  if (f.calibrate && !f.algorithms.empty()) return UsageError("-a and --calibrate: one of them");
  if (f.calibrate && !f.json.empty()) {
    return UsageError("--json: --calibrate has no rows; it writes its tuning file (--output)");
  }
  if (f.transport != "mpi" && f.transport != "ucx") {
    return UsageError("unknown --transport '" + f.transport + "'; mpi or ucx");
  }
  if (f.transport == "ucx" && f.algorithms.empty()) {
    return UsageError(
        "--transport ucx compares kolo's algorithms: give -a (the runtime's modes "
        "follow KOLO_TRANSPORT)");
  }
  if (!f.algorithms.empty()) {
    const std::vector<std::string> known = RegisteredAlgorithmNames();
    for (const std::string& name : SplitCommas(f.algorithms)) {
      if (name != "all" && std::find(known.begin(), known.end(), name) == known.end()) {
        return UsageError("unknown -a '" + name + "'; one of " + algorithm_names +
                          "all, or 0..3 (nccl-tests' average mode)");
      }
      config->algorithms.push_back(name);
    }
    if (config->algorithms.empty()) return UsageError("-a is empty");
    if (config->dtypes.size() != 1 || config->dtypes[0]->kolo != KOLO_FLOAT32 ||
        config->ops.size() != 1 || config->ops[0]->name != "sum") {
      return UsageError("-a measures float32 sum only (-d float -o sum)");
    }
  }
  if (f.negotiation) {
    for (const std::string& t : SplitCommas(f.tensors)) {
      if (t.size() > 7 || !IsDigits(t) || std::stoi(t) < 1) {
        return UsageError("bad --tensors entry '" + t + "' (1 to 9999999)");
      }
      config->tensors.push_back(std::stoi(t));
    }
    if (config->tensors.empty()) return UsageError("--tensors is empty");
  }
  return -1;
}

}  // namespace kolo::bench
