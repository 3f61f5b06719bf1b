#include "runtime/config.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "base/ascii.h"
#include "base/check.h"
#include "collectives/host/handover_watch.h"

namespace kolo {

namespace {

// The parsers of Knobs()'s rows, one per kind of value; each writes the field it is
// instantiated with.

// Digits only: strtod and strtoll would skip leading blanks and accept a sign.
bool StartsWithDigit(std::string_view v) {
  return !v.empty() && std::isdigit(static_cast<unsigned char>(v.front()));
}

template <auto Field>
Status Flag(std::string_view v, Config& c) {
  if (v != "0" && v != "1") return InvalidArgumentError("expected 0 or 1");
  c.*Field = v == "1";
  return Status::OK();
}

template <auto Field>
Status Text(std::string_view v, Config& c) {
  c.*Field = std::string(v);
  return Status::OK();
}

// A real number of `unit` in [0, max].
Status ParseReal(std::string_view v, double max, const char* unit, double* out) {
  const std::string text(v);
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(text.c_str(), &end);
  if (text.empty() || errno || *end != '\0' || !(x >= 0) || x > max) {
    return InvalidArgumentError(fmt::format("expected {} in [0, {}]", unit, max));
  }
  *out = x;
  return Status::OK();
}

template <auto Field, int Max>
Status Seconds(std::string_view v, Config& c) {
  return ParseReal(v, Max, "seconds", &(c.*Field));
}

template <auto Field, int Max>
Status Milliseconds(std::string_view v, Config& c) {
  return ParseReal(v, Max, "milliseconds", &(c.*Field));
}

// A whole number of `what` in [Low, High].
template <auto Field, int Low, int High>
Status Whole(std::string_view v, Config& c, const char* what) {
  const std::string text(v);
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(text.c_str(), &end, 10);
  if (!StartsWithDigit(v) || errno || *end != '\0' || n < Low || n > High) {
    return InvalidArgumentError(fmt::format("expected {} in [{}, {}]", what, Low, High));
  }
  c.*Field = static_cast<std::remove_reference_t<decltype(c.*Field)>>(n);
  return Status::OK();
}

template <auto Field, int Low, int High>
Status WholeNumber(std::string_view v, Config& c) {
  return Whole<Field, Low, High>(v, c, "a whole number");
}

template <auto Field, int Low, int High>
Status Entries(std::string_view v, Config& c) {
  return Whole<Field, Low, High>(v, c, "a number of entries");
}

template <auto Field, int Min>
Status Bytes(std::string_view v, Config& c) {
  auto bytes = ParseBytes(v);
  if (!bytes.ok()) return bytes.status();
  if (*bytes < Min) return InvalidArgumentError(fmt::format("must be at least {} bytes", Min));
  c.*Field = *bytes;
  return Status::OK();
}

// KOLO_FUSION_DIRECT_BYTES: "auto" or a byte count.
Status DirectBytes(std::string_view v, Config& c) {
  if (v == "auto") {
    c.fusion_direct_bytes = kFusionDirectAuto;
    return Status::OK();
  }
  return Bytes<&Config::fusion_direct_bytes, 0>(v, c);
}

Status Level(std::string_view v, Config& c) {
  auto level = ParseLogLevel(std::string(v));
  if (!level.ok()) return level.status();
  c.log_level = *level;
  return Status::OK();
}

Status Transport(std::string_view v, Config& c) {
  if (v != "mpi" && v != "ucx") return InvalidArgumentError("expected mpi or ucx");
  c.transport = std::string(v);
  return Status::OK();
}

Status ShmStores(std::string_view v, Config& c) {
  HandoverWatch::Mode mode;
  if (!ParseShmStores(v, &mode)) return InvalidArgumentError("expected auto, plain or streamed");
  c.shm_stores = std::string(v);
  return Status::OK();
}

}  // namespace

const std::vector<Knob>& Knobs() {
  static const std::vector<Knob> knobs = {
      {"KOLO_CYCLE_TIME", "HOROVOD_CYCLE_TIME", "ms", "1",
       "time between negotiation cycles of the background thread",
       Milliseconds<&Config::cycle_time_ms, 60000>},
      {"KOLO_FUSION_THRESHOLD", "HOROVOD_FUSION_THRESHOLD", "bytes", "134217728",
       "most bytes of tensors fused into one all-reduce; 0 disables fusion",
       Bytes<&Config::fusion_threshold_bytes, 0>},
      {"KOLO_FUSION_CHUNK_BYTES", "", "bytes", "4194304",
       "fused groups are packed, reduced and unpacked in pieces of this size (also the largest "
       "single library call)",
       Bytes<&Config::fusion_chunk_bytes, 64>},
      {"KOLO_FUSION_DIRECT_BYTES", "", "bytes|auto", "auto",
       "a tensor at least this large is not fused: it is reduced straight from its own buffers; "
       "auto: 64 KiB, and no limit for host tensors on one node with shared memory (fused "
       "there without copies)",
       DirectBytes},
      {"KOLO_WAKE_ON_SUBMIT", "", "0/1", "1",
       "1: a submission starts the next negotiation cycle at once; 0: cycles run only every "
       "KOLO_CYCLE_TIME, as in Horovod",
       Flag<&Config::wake_on_submit>},
      {"KOLO_LOG_LEVEL", "HOROVOD_LOG_LEVEL", "", "warning",
       "trace, debug, info, warning, error or fatal", Level},
      {"KOLO_LOG_HIDE_TIME", "HOROVOD_LOG_HIDE_TIME", "0/1", "0", "1 hides time stamps in logs",
       Flag<&Config::log_hide_time>},
      {"KOLO_CACHE_CAPACITY", "HOROVOD_CACHE_CAPACITY", "entries", "1024",
       "tensors whose negotiation is remembered, so a repeat is agreed with one bit all-reduce; "
       "0 disables the response cache (same value on every rank)",
       Entries<&Config::cache_capacity, 0, 1 << 20>},
      {"KOLO_STALL_CHECK_TIME_SECONDS", "HOROVOD_STALL_CHECK_TIME_SECONDS", "s", "60",
       "rank 0 warns about tensors some ranks submitted and others have not for this long, "
       "naming the missing ranks",
       Seconds<&Config::stall_check_seconds, 1000000>},
      {"KOLO_STALL_SHUTDOWN_TIME_SECONDS", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "s", "0",
       "after this long, such tensors fail on every rank with the stall message; 0 = never",
       Seconds<&Config::stall_shutdown_seconds, 1000000>},
      {"KOLO_START_TIMEOUT", "HOROVOD_START_TIMEOUT", "s", "30",
       "kolo_init fails on every rank that called it, naming the ranks that did not, when they "
       "have not all called it within this long (needs a PMIx launcher: Open MPI's mpirun, "
       "srun --mpi=pmix); also bounds making an NCCL communicator and its first connection; 0 = "
       "wait for ever",
       Seconds<&Config::start_timeout_seconds, 1000000>},
      {"KOLO_STALL_CHECK_DISABLE", "HOROVOD_STALL_CHECK_DISABLE", "0/1", "0",
       "1 turns the stall inspector off", Flag<&Config::stall_check_disable>},
      {"KOLO_AUTOTUNE", "HOROVOD_AUTOTUNE", "0/1", "0",
       "1 tunes the fusion threshold and the cycle time online from the measured throughput "
       "(runtime/negotiation/autotune.h), the same values on every rank",
       Flag<&Config::autotune>},
      {"KOLO_AUTOTUNE_LOG", "HOROVOD_AUTOTUNE_LOG", "path", "",
       "rank 0 writes each autotune trial (setting, score) to this CSV file",
       Text<&Config::autotune_log>},
      {"KOLO_AUTOTUNE_WARMUP_SAMPLES", "HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "samples", "3",
       "autotune samples discarded at the start",
       WholeNumber<&Config::autotune_warmup_samples, 0, 100000>},
      {"KOLO_AUTOTUNE_STEPS_PER_SAMPLE", "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "cycles", "10",
       "cycles with all-reduce work per autotune sample",
       WholeNumber<&Config::autotune_steps_per_sample, 1, 100000>},
      {"KOLO_TIMELINE", "HOROVOD_TIMELINE", "path", "",
       "rank 0 writes a Chrome trace of every tensor's negotiation and execution to this file "
       "(opened and checked at start)",
       Text<&Config::timeline_path>},
      {"KOLO_TIMELINE_MARK_CYCLES", "HOROVOD_TIMELINE_MARK_CYCLES", "0/1", "0",
       "1 marks the start of every background cycle in the timeline",
       Flag<&Config::timeline_mark_cycles>},
      {"KOLO_ALLREDUCE_ALGO", "", "name", "auto",
       "all-reduce algorithm: auto (the cost model picks per message) or one of ring, rd, "
       "rabenseifner, tree, dbtree, shm, hierarchical, mpi (host), nccl, nccl_hierarchical "
       "(GPU); a forced one that cannot run an all-reduce fails it with the reason",
       Text<&Config::allreduce_algo>},
      {"KOLO_ALLGATHER_ALGO", "", "name", "auto",
       "all-gather: auto, mpi (the library's), ring or rd (kolo's) for host buffers; nccl for GPU "
       "buffers",
       Text<&Config::allgather_algo>},
      {"KOLO_BROADCAST_ALGO", "", "name", "auto",
       "broadcast: auto, mpi (the library's), binomial or scatter_allgather (kolo's) for host "
       "buffers; nccl for GPU buffers",
       Text<&Config::broadcast_algo>},
      {"KOLO_REDUCESCATTER_ALGO", "", "name", "auto",
       "reduce-scatter: auto, mpi (the library's), ring (kolo's) for host buffers; nccl for GPU "
       "buffers",
       Text<&Config::reducescatter_algo>},
      {"KOLO_ALLTOALL_ALGO", "", "name", "auto",
       "all-to-all: auto, mpi (the library's), pairwise (kolo's) for host buffers; nccl for GPU "
       "buffers",
       Text<&Config::alltoall_algo>},
      {"KOLO_NCCL_ALGO", "", "name", "",
       "NCCL's algorithm for its all-reduce, in NCCL_ALGO's syntax (Ring, Tree, ^Tree, "
       "allreduce:ring;...). NCCL reads only NCCL_ALGO, from the environment when it makes its "
       "first communicator, and kolo does not set NCCL_ALGO: set NCCL_ALGO "
       "to the same value (kolo_init refuses the two differing, case aside). Unset: "
       "NCCL_ALGO's value. The cost model predicts NCCL's all-reduce (the `nccl` entry) as the "
       "algorithm this leaves NCCL",
       Text<&Config::nccl_algo>},
      {"KOLO_HIERARCHICAL_ALLREDUCE", "HOROVOD_HIERARCHICAL_ALLREDUCE", "0/1", "0",
       "1: the hierarchical all-reduce (reduce-scatter in the node, all-reduce across nodes, "
       "all-gather in the node) for every message when the job spans several nodes; on one "
       "node the cost model's choice. KOLO_ALLREDUCE_ALGO wins when set",
       Flag<&Config::hierarchical_allreduce>},
      {"KOLO_TUNING_FILE", "", "path", "",
       "cost-model parameters written by `kolo-bench --calibrate` (JSON); unset = built-in "
       "defaults",
       Text<&Config::tuning_file>},
      {"KOLO_TOPOLOGY_XML", "", "path", "",
       "an hwloc XML export (lstopo --of xml) each node reads instead of discovering its "
       "machine; unset = hwloc discovery",
       Text<&Config::topology_xml>},
      {"KOLO_NODE_GROUPING", "", "spec", "",
       "how ranks group into nodes, overriding the hosts: 2x2 (nodes x ranks), 3+2 (node "
       "sizes) or 0,0,1,1 (a node id per rank)",
       Text<&Config::node_grouping>},
      {"KOLO_TRANSPORT", "", "mpi|ucx", "mpi",
       "what kolo's own traffic (negotiation, kolo's algorithms) runs over: mpi, or ucx (UCP's "
       "tag API; under mpirun, MPI still starts the job)",
       Transport},
      {"KOLO_SHM_STORES", "", "auto|plain|streamed", "auto",
       "how the shared-memory all-reduce writes what its peers read: auto (streamed while the "
       "cores hand cache lines over slowly, as a probe at the first and every 8th large piece "
       "decides), plain or streamed",
       ShmStores},
  };
  return knobs;
}

Config::Config() {
  for (const Knob& knob : Knobs()) {
    const Status s = knob.parse(knob.default_value, *this);
    // A default the row's own parser refuses is a defect of the table, caught by its tests.
    KOLO_CHECK(s.ok()) << ": " << knob.name << "'s default '" << knob.default_value
                       << "': " << s.message();
  }
}

StatusOr<int64_t> ParseBytes(std::string_view text) {
  std::string s(text);
  if (s.empty()) return InvalidArgumentError("empty byte count");
  // strtoll would skip leading blanks and accept a sign; a byte count is digits only.
  if (!std::isdigit(static_cast<unsigned char>(s.front()))) {
    return InvalidArgumentError("'" + std::string(text) +
                                "' is not a byte count (e.g. 1048576, 64K, 64M, 1G)");
  }
  int64_t mult = 1;
  char last = s.back();
  if (last == 'K' || last == 'k') mult = int64_t{1} << 10;
  if (last == 'M' || last == 'm') mult = int64_t{1} << 20;
  if (last == 'G' || last == 'g') mult = int64_t{1} << 30;
  if (mult != 1) s.pop_back();
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || errno != 0 || *end != '\0' || v < 0 || v > (INT64_MAX / mult)) {
    return InvalidArgumentError("'" + std::string(text) +
                                "' is not a byte count (e.g. 1048576, 64K, 64M, 1G)");
  }
  return static_cast<int64_t>(v) * mult;
}

namespace {

// The value of a knob: KOLO_ name first, then the Horovod alias; nullptr when unset or empty.
// *used receives the variable's name, for error messages.
const char* Lookup(const EnvLookup& env, const Knob& knob, std::string_view* used) {
  *used = knob.name;
  const char* v = env(std::string(knob.name).c_str());
  if (v && *v) return v;
  if (!knob.horovod_name.empty()) {
    *used = knob.horovod_name;
    v = env(std::string(knob.horovod_name).c_str());
    if (v && *v) return v;
  }
  return nullptr;
}

}  // namespace

StatusOr<Config> ConfigFromEnvironment(const EnvLookup& env) {
  Config c;
  for (const Knob& knob : Knobs()) {
    std::string_view used;
    const char* v = Lookup(env, knob, &used);
    if (!v) continue;
    const Status s = knob.parse(v, c);
    if (!s.ok()) {
      return InvalidArgumentError(fmt::format("{}='{}': {}", used, v, s.message()));
    }
  }
  // NCCL takes its algorithm from NCCL_ALGO alone, so kolo's name for it can only confirm it.
  const char* nccl = env("NCCL_ALGO");
  const std::string nccl_algo = nccl ? nccl : "";
  if (c.nccl_algo.empty()) {
    c.nccl_algo = nccl_algo;
  } else if (AsciiLower(c.nccl_algo) != AsciiLower(nccl_algo)) {  // NCCL ignores case
    return InvalidArgumentError(fmt::format(
        "KOLO_NCCL_ALGO='{}' but NCCL_ALGO is {}: NCCL reads only NCCL_ALGO, from the "
        "environment when it makes its first communicator, and kolo does not set NCCL_ALGO; "
        "set NCCL_ALGO='{}' where the ranks are launched (mpirun -x "
        "NCCL_ALGO=...)",
        c.nccl_algo, nccl ? fmt::format("'{}'", nccl_algo) : std::string("unset"), c.nccl_algo));
  }
  return c;
}

StatusOr<Config> ConfigFromEnvironment() {
  return ConfigFromEnvironment([](const char* name) { return std::getenv(name); });
}

namespace {

// Read by kolo outside the knob table, or by its scripts and tests, or set by Horovod's
// launcher in every rank: known, so not reported.
constexpr std::string_view kOtherKnown[] = {
    // scripts/ and tests/
    "KOLO_ROOT",
    "KOLO_BUILD_DIR",
    "KOLO_BUILD_JOBS",
    "KOLO_BUILD_LOCK",
    "KOLO_BUILD_TYPE",
    "KOLO_SKIP_APT",
    "KOLO_TEST_TIMEOUT",
    "KOLO_SANITIZE_STAGES",
    "KOLO_FUZZ_SECONDS",
    "KOLO_PYTEST_TIMEOUT_S",
    "KOLO_KEEP_TIMELINES",
    "KOLO_TEST_WAIT_S",
    "KOLO_TEST_WARN_S",
    "KOLO_TEST_WATCHDOG_S",
    "KOLO_TOPOLOGY_EXPORTS_DIR",
    "KOLO_GPU_ARCH",
    "KOLO_GPU_CHECK_DRY_RUN",
    "KOLO_GPU_CHECK_BUDGET_S",
    "KOLO_GPU_BUILD_DIR",
    "KOLO_GPU_PYTHON",
    "KOLO_NP",
    "KOLO_VENV",
    "KOLO_TORCH_VENV",
    // the start without MPI (runtime/world/env_bootstrap.h)
    "KOLO_MASTER_PORT",
    "KOLO_JOB_ID",
    // horovodrun's per-rank variables
    "HOROVOD_RANK",
    "HOROVOD_SIZE",
    "HOROVOD_LOCAL_RANK",
    "HOROVOD_LOCAL_SIZE",
    "HOROVOD_CROSS_RANK",
    "HOROVOD_CROSS_SIZE",
    "HOROVOD_HOSTNAME",
    "HOROVOD_CONTROLLER",
    "HOROVOD_CPU_OPERATIONS",
    "HOROVOD_GPU_OPERATIONS",
};

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::vector<std::string> UnknownVariables(const std::vector<std::string>& names) {
  std::vector<std::string_view> known;
  for (const Knob& k : Knobs()) {
    known.push_back(k.name);
    if (!k.horovod_name.empty()) known.push_back(k.horovod_name);
  }
  std::vector<std::string> out;
  for (const std::string& name : names) {
    // KOLO_UCX_* are UCX's own variables, read for kolo's UCX context (ucp_config_read).
    const bool ours = (name.rfind("KOLO_", 0) == 0 && name.rfind("KOLO_UCX_", 0) != 0) ||
                      name.rfind("HOROVOD_", 0) == 0;
    if (!ours || std::find(known.begin(), known.end(), name) != known.end() ||
        std::find(std::begin(kOtherKnown), std::end(kOtherKnown), name) != std::end(kOtherKnown)) {
      continue;
    }
    std::string line = name;
    std::string_view closest;
    size_t best = 3;  // a misspelling: at most 2 edits away
    for (std::string_view k : known) {
      const size_t d = EditDistance(name, k);
      if (d < best) {
        best = d;
        closest = k;
      }
    }
    if (!closest.empty()) {
      line += " (did you mean " + std::string(closest) + "?)";
    } else if (name.rfind("HOROVOD_", 0) == 0) {
      line += " (a Horovod setting kolo has no equivalent of)";
    }
    out.push_back(std::move(line));
  }
  return out;
}

void WarnUnknownVariables() {
  // Once per process: a program may start kolo again after a shutdown.
  static std::atomic<bool> warned{false};
  if (warned.exchange(true)) return;
  std::vector<std::string> names;
  for (char** e = environ; e && *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq) names.emplace_back(*e, eq - *e);
  }
  std::sort(names.begin(), names.end());
  const std::vector<std::string> unknown = UnknownVariables(names);
  if (unknown.empty()) return;
  std::string msg = "ignoring environment variable" + std::string(unknown.size() > 1 ? "s" : "") +
                    " that kolo does not know:";
  for (const std::string& u : unknown) msg += " " + u + ";";
  msg.pop_back();
  KOLO_LOG_WARNING("config", "{} (README.md lists kolo's settings)", msg);
}

}  // namespace kolo
