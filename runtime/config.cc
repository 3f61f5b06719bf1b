#include "runtime/config.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace kolo {

const std::vector<Knob>& Knobs() {
  static const std::vector<Knob> knobs = {
      {"KOLO_CYCLE_TIME", "HOROVOD_CYCLE_TIME", "ms", "1",
       "time between negotiation cycles of the background thread"},
      {"KOLO_FUSION_THRESHOLD", "HOROVOD_FUSION_THRESHOLD", "bytes", "134217728",
       "most bytes of tensors fused into one all-reduce; 0 disables fusion"},
      {"KOLO_FUSION_CHUNK_BYTES", "", "bytes", "4194304",
       "fused groups are packed, reduced and unpacked in pieces of this size (also the largest "
       "single library call)"},
      {"KOLO_FUSION_DIRECT_BYTES", "", "bytes", "65536",
       "a tensor at least this large is not fused: it is reduced straight from its own buffers"},
      {"KOLO_WAKE_ON_SUBMIT", "", "0/1", "1",
       "1: a submission starts the next negotiation cycle at once; 0: cycles run only every "
       "KOLO_CYCLE_TIME, as in Horovod"},
      {"KOLO_LOG_LEVEL", "HOROVOD_LOG_LEVEL", "", "warning",
       "trace, debug, info, warning, error or fatal"},
      {"KOLO_LOG_HIDE_TIME", "HOROVOD_LOG_HIDE_TIME", "0/1", "0", "1 hides time stamps in logs"},
      {"KOLO_CACHE_CAPACITY", "HOROVOD_CACHE_CAPACITY", "entries", "1024",
       "tensors whose negotiation is remembered, so a repeat is agreed with one bit all-reduce; "
       "0 disables the response cache (same value on every rank)"},
      {"KOLO_STALL_CHECK_TIME_SECONDS", "HOROVOD_STALL_CHECK_TIME_SECONDS", "s", "60",
       "rank 0 warns about tensors some ranks submitted and others have not for this long, "
       "naming the missing ranks"},
      {"KOLO_STALL_SHUTDOWN_TIME_SECONDS", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "s", "0",
       "after this long, such tensors fail on every rank with the stall message; 0 = never"},
      {"KOLO_START_TIMEOUT", "HOROVOD_START_TIMEOUT", "s", "30",
       "kolo_init fails on every rank that called it, naming the ranks that did not, when they "
       "have not all called it within this long (needs a PMIx launcher: Open MPI's mpirun, "
       "srun --mpi=pmix); 0 = wait for ever"},
      {"KOLO_STALL_CHECK_DISABLE", "HOROVOD_STALL_CHECK_DISABLE", "0/1", "0",
       "1 turns the stall inspector off"},
      {"KOLO_AUTOTUNE", "HOROVOD_AUTOTUNE", "0/1", "0",
       "1 tunes the fusion threshold and the cycle time online from the measured throughput "
       "(runtime/autotune.h), the same values on every rank"},
      {"KOLO_AUTOTUNE_LOG", "HOROVOD_AUTOTUNE_LOG", "path", "",
       "rank 0 writes each autotune trial (setting, score) to this CSV file"},
      {"KOLO_AUTOTUNE_WARMUP_SAMPLES", "HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "samples", "3",
       "autotune samples discarded at the start"},
      {"KOLO_AUTOTUNE_STEPS_PER_SAMPLE", "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "cycles", "10",
       "cycles with all-reduce work per autotune sample"},
      {"KOLO_TIMELINE", "HOROVOD_TIMELINE", "path", "",
       "rank 0 writes a Chrome trace of every tensor's negotiation and execution to this file"},
      {"KOLO_TIMELINE_MARK_CYCLES", "HOROVOD_TIMELINE_MARK_CYCLES", "0/1", "0",
       "1 marks the start of every background cycle in the timeline"},
      {"KOLO_ALLREDUCE_ALGO", "", "name", "auto",
       "all-reduce algorithm: auto (the cost model picks per message) or one of ring, rd, "
       "rabenseifner, tree, dbtree, shm, hierarchical, mpi; a forced one that cannot run an "
       "all-reduce fails it with the reason"},
      {"KOLO_HIERARCHICAL_ALLREDUCE", "HOROVOD_HIERARCHICAL_ALLREDUCE", "0/1", "0",
       "1: the hierarchical all-reduce (reduce-scatter in the node, all-reduce across nodes, "
       "all-gather in the node) for every message when the job spans several nodes; on one "
       "node the cost model's choice. KOLO_ALLREDUCE_ALGO wins when set"},
      {"KOLO_TUNING_FILE", "", "path", "",
       "cost-model parameters written by `kolo-bench --calibrate` (JSON); unset = built-in "
       "defaults"},
      {"KOLO_ALLGATHER_ALGO", "", "name", "auto",
       "all-gather: auto or mpi (the library's), ring or rd (kolo's)"},
      {"KOLO_BROADCAST_ALGO", "", "name", "auto",
       "broadcast: auto or mpi (the library's), binomial or scatter_allgather (kolo's)"},
      {"KOLO_REDUCESCATTER_ALGO", "", "name", "auto",
       "reduce-scatter: auto or mpi (the library's), ring (kolo's)"},
      {"KOLO_ALLTOALL_ALGO", "", "name", "auto",
       "all-to-all: auto or mpi (the library's), pairwise (kolo's)"},
      {"KOLO_NODE_GROUPING", "", "spec", "",
       "how ranks group into nodes, overriding the hosts: 2x2 (nodes x ranks), 3+2 (node "
       "sizes) or 0,0,1,1 (a node id per rank)"},
      {"KOLO_TOPOLOGY_XML", "", "path", "",
       "an hwloc XML export (lstopo --of xml) each node reads instead of discovering its "
       "machine; unset = hwloc discovery"},
  };
  return knobs;
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
    auto Malformed = [&](const char* value, std::string_view why) {
      return InvalidArgumentError(std::string(used) + "='" + value + "': " + std::string(why));
    };
    if (knob.name == "KOLO_CYCLE_TIME") {
      char* end = nullptr;
      errno = 0;
      double ms = std::strtod(v, &end);
      if (errno || *end != '\0' || !(ms >= 0) || ms > 60000) {
        return Malformed(v, "expected milliseconds in [0, 60000]");
      }
      c.cycle_time_ms = ms;
    } else if (knob.name == "KOLO_FUSION_THRESHOLD" || knob.name == "KOLO_FUSION_CHUNK_BYTES" ||
               knob.name == "KOLO_FUSION_DIRECT_BYTES") {
      auto bytes = ParseBytes(v);
      if (!bytes.ok()) return Malformed(v, bytes.status().message());
      if (knob.name == "KOLO_FUSION_THRESHOLD") {
        c.fusion_threshold_bytes = *bytes;
      } else if (knob.name == "KOLO_FUSION_DIRECT_BYTES") {
        c.fusion_direct_bytes = *bytes;
      } else {
        if (*bytes < 64) return Malformed(v, "must be at least 64 bytes");
        c.fusion_chunk_bytes = *bytes;
      }
    } else if (knob.name == "KOLO_CACHE_CAPACITY") {
      char* end = nullptr;
      errno = 0;
      long long n = std::strtoll(v, &end, 10);
      if (errno || *end != '\0' || !std::isdigit(static_cast<unsigned char>(*v)) || n > 1 << 20) {
        return Malformed(v, "expected a number of entries in [0, 1048576]");
      }
      c.cache_capacity = n;
    } else if (knob.name == "KOLO_STALL_CHECK_TIME_SECONDS" ||
               knob.name == "KOLO_STALL_SHUTDOWN_TIME_SECONDS" ||
               knob.name == "KOLO_START_TIMEOUT") {
      char* end = nullptr;
      errno = 0;
      double s = std::strtod(v, &end);
      if (errno || *end != '\0' || !(s >= 0) || s > 1e6) {
        return Malformed(v, "expected seconds in [0, 1000000]");
      }
      (knob.name == "KOLO_STALL_CHECK_TIME_SECONDS"      ? c.stall_check_seconds
       : knob.name == "KOLO_STALL_SHUTDOWN_TIME_SECONDS" ? c.stall_shutdown_seconds
                                                         : c.start_timeout_seconds) = s;
    } else if (knob.name == "KOLO_STALL_CHECK_DISABLE" || knob.name == "KOLO_AUTOTUNE") {
      std::string s(v);
      if (s != "0" && s != "1") return Malformed(v, "expected 0 or 1");
      (knob.name == "KOLO_AUTOTUNE" ? c.autotune : c.stall_check_disable) = s == "1";
    } else if (knob.name == "KOLO_AUTOTUNE_LOG") {
      c.autotune_log = v;
    } else if (knob.name == "KOLO_AUTOTUNE_WARMUP_SAMPLES" ||
               knob.name == "KOLO_AUTOTUNE_STEPS_PER_SAMPLE") {
      char* end = nullptr;
      errno = 0;
      long n = std::strtol(v, &end, 10);
      const long low = knob.name == "KOLO_AUTOTUNE_WARMUP_SAMPLES" ? 0 : 1;
      if (errno || *end != '\0' || !std::isdigit(static_cast<unsigned char>(*v)) || n < low ||
          n > 100000) {
        return Malformed(v, "expected a whole number in [" + std::to_string(low) + ", 100000]");
      }
      (knob.name == "KOLO_AUTOTUNE_WARMUP_SAMPLES" ? c.autotune_warmup_samples
                                                   : c.autotune_steps_per_sample) =
          static_cast<int>(n);
    } else if (knob.name == "KOLO_LOG_LEVEL") {
      auto level = ParseLogLevel(v);
      if (!level.ok()) return Malformed(v, level.status().message());
      c.log_level = *level;
    } else if (knob.name == "KOLO_LOG_HIDE_TIME" || knob.name == "KOLO_WAKE_ON_SUBMIT" ||
               knob.name == "KOLO_TIMELINE_MARK_CYCLES" ||
               knob.name == "KOLO_HIERARCHICAL_ALLREDUCE") {
      std::string s(v);
      if (s != "0" && s != "1") return Malformed(v, "expected 0 or 1");
      bool& flag = knob.name == "KOLO_LOG_HIDE_TIME"          ? c.log_hide_time
                   : knob.name == "KOLO_WAKE_ON_SUBMIT"        ? c.wake_on_submit
                   : knob.name == "KOLO_HIERARCHICAL_ALLREDUCE" ? c.hierarchical_allreduce
                                                                : c.timeline_mark_cycles;
      flag = s == "1";
    } else if (knob.name == "KOLO_TIMELINE") {
      c.timeline_path = v;  // opened (and checked) by rank 0 at start
    } else if (knob.name == "KOLO_ALLREDUCE_ALGO") {
      c.allreduce_algo = v;
    } else if (knob.name == "KOLO_TUNING_FILE") {
      c.tuning_file = v;
    } else if (knob.name == "KOLO_NODE_GROUPING") {
      c.node_grouping = v;
    } else if (knob.name == "KOLO_TOPOLOGY_XML") {
      c.topology_xml = v;
    } else if (knob.name == "KOLO_ALLGATHER_ALGO") {
      c.allgather_algo = v;
    } else if (knob.name == "KOLO_BROADCAST_ALGO") {
      c.broadcast_algo = v;
    } else if (knob.name == "KOLO_REDUCESCATTER_ALGO") {
      c.reducescatter_algo = v;
    } else if (knob.name == "KOLO_ALLTOALL_ALGO") {
      c.alltoall_algo = v;
    }
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
    "KOLO_NCCL_ALGO",  // collectives/nccl/nccl_run.cc, documented in README.md
    // scripts/ and tests/
    "KOLO_ROOT", "KOLO_BUILD_DIR", "KOLO_BUILD_JOBS", "KOLO_BUILD_LOCK", "KOLO_BUILD_TYPE",
    "KOLO_SKIP_APT", "KOLO_TEST_TIMEOUT", "KOLO_SANITIZE_STAGES", "KOLO_FUZZ_SECONDS",
    "KOLO_PYTEST_TIMEOUT_S", "KOLO_KEEP_TIMELINES", "KOLO_TEST_WAIT_S", "KOLO_TEST_WARN_S",
    "KOLO_TEST_WATCHDOG_S",
    // horovodrun's per-rank variables
    "HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE",
    "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE", "HOROVOD_HOSTNAME", "HOROVOD_CONTROLLER",
    "HOROVOD_CPU_OPERATIONS", "HOROVOD_GPU_OPERATIONS",
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
    const bool ours = name.rfind("KOLO_", 0) == 0 || name.rfind("HOROVOD_", 0) == 0;
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
