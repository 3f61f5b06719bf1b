// The one place kolo's knobs are defined: Knobs() has a row per variable. Each KOLO_* variable
// accepts its Horovod twin (HOROVOD_*) as an alias; when both are set, KOLO_ wins.
#ifndef KOLO_RUNTIME_CONFIG_H_
#define KOLO_RUNTIME_CONFIG_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/logging.h"
#include "base/status.h"

namespace kolo {

// KOLO_FUSION_DIRECT_BYTES=auto (the default): kFusionDirectPackedBytes where fused tensors are
// packed into the fusion buffer, and no limit for host tensors where the node's all-reduce
// takes a fused response's tensors in their own buffers (Runtime::HostFusionTakesLists).
constexpr int64_t kFusionDirectAuto = -1;
constexpr int64_t kFusionDirectPackedBytes = int64_t{64} << 10;
// The direct size where fusion packs: the configured one, or auto's.
inline int64_t PackedDirectBytes(int64_t configured) {
  return configured < 0 ? kFusionDirectPackedBytes : configured;
}

// Every field's default and parser live in its row of Knobs(): a default-constructed Config
// holds the rows' defaults.
struct Config {
  Config();

  double cycle_time_ms;             // KOLO_CYCLE_TIME
  int64_t fusion_threshold_bytes;   // KOLO_FUSION_THRESHOLD; 0 disables fusion
  int64_t fusion_chunk_bytes;       // KOLO_FUSION_CHUNK_BYTES
  int64_t fusion_direct_bytes;      // KOLO_FUSION_DIRECT_BYTES; kFusionDirectAuto: "auto"
  bool wake_on_submit;              // KOLO_WAKE_ON_SUBMIT
  LogLevel log_level;               // KOLO_LOG_LEVEL
  bool log_hide_time;               // KOLO_LOG_HIDE_TIME
  int64_t cache_capacity;           // KOLO_CACHE_CAPACITY; 0 disables the cache
  double stall_check_seconds;       // KOLO_STALL_CHECK_TIME_SECONDS
  double stall_shutdown_seconds;    // KOLO_STALL_SHUTDOWN_TIME_SECONDS; 0 = off
  bool stall_check_disable;         // KOLO_STALL_CHECK_DISABLE
  double start_timeout_seconds;     // KOLO_START_TIMEOUT; 0 = no limit
  bool autotune;                    // KOLO_AUTOTUNE
  std::string autotune_log;         // KOLO_AUTOTUNE_LOG
  int autotune_warmup_samples;      // KOLO_AUTOTUNE_WARMUP_SAMPLES
  int autotune_steps_per_sample;    // KOLO_AUTOTUNE_STEPS_PER_SAMPLE
  std::string timeline_path;        // KOLO_TIMELINE; "" = no timeline (rank 0 only)
  bool timeline_mark_cycles;        // KOLO_TIMELINE_MARK_CYCLES
  std::string allreduce_algo;       // KOLO_ALLREDUCE_ALGO (checked by the selector)
  std::string tuning_file;          // KOLO_TUNING_FILE ("" = built-in cost model)
  std::string node_grouping;        // KOLO_NODE_GROUPING ("" = by host)
  std::string transport;            // KOLO_TRANSPORT: "mpi" or "ucx"
  std::string shm_stores;           // KOLO_SHM_STORES: auto, plain or streamed
  std::string topology_xml;         // KOLO_TOPOLOGY_XML ("" = discover with hwloc)
  std::string allgather_algo;       // KOLO_ALLGATHER_ALGO
  std::string broadcast_algo;       // KOLO_BROADCAST_ALGO
  std::string reducescatter_algo;   // KOLO_REDUCESCATTER_ALGO
  std::string alltoall_algo;        // KOLO_ALLTOALL_ALGO
  std::string nccl_algo;            // KOLO_NCCL_ALGO, which must equal NCCL_ALGO; else NCCL_ALGO
  bool hierarchical_allreduce;      // KOLO_HIERARCHICAL_ALLREDUCE
};

// One row per knob: its names, its documentation, its default and how a value is parsed into
// its field. README.md's table of environment variables is checked against these rows.
struct Knob {
  std::string_view name;          // "KOLO_CYCLE_TIME"
  std::string_view horovod_name;  // "HOROVOD_CYCLE_TIME" or "" when there is no twin
  std::string_view unit;
  std::string_view default_value;  // parsed by `parse` into every default-constructed Config
  std::string_view description;
  // Sets the knob's field of `config` from `value`; an error says what was expected
  // ("expected 0 or 1"), and the caller names the variable.
  Status (*parse)(std::string_view value, Config& config);
};

// Every knob.
const std::vector<Knob>& Knobs();

// Reads the environment through `getenv` (injectable for tests). A malformed value is a
// kInvalidArgument naming the variable and the value.
using EnvLookup = std::function<const char*(const char*)>;
StatusOr<Config> ConfigFromEnvironment(const EnvLookup& getenv_fn);
StatusOr<Config> ConfigFromEnvironment();

// The names among `names` (environment variable names) that start with KOLO_ or HOROVOD_ but
// are no setting kolo reads, each with a hint: "KOLO_FUSION_THRESHOLDS (did you mean
// KOLO_FUSION_THRESHOLD?)", "HOROVOD_NUM_NCCL_STREAMS (a Horovod setting kolo has no
// equivalent of)". Variables of kolo's scripts and of Horovod's launcher are known.
std::vector<std::string> UnknownVariables(const std::vector<std::string>& names);
// One warning listing UnknownVariables of this process's environment, the first time it is
// called in the process (kolo_init, rank 0).
void WarnUnknownVariables();

// Parses a byte count: "1048576", "64K", "64M", "1G" (binary units).
StatusOr<int64_t> ParseBytes(std::string_view text);

}  // namespace kolo

#endif  // KOLO_RUNTIME_CONFIG_H_
