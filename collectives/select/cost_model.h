// Hockney's alpha-beta-gamma cost model (Hockney 1994; the per-algorithm formulas of Thakur,
// Rabenseifner & Gropp 2005, sec. 4, and collectives/ALGORITHMS.md): sending n bytes over a
// link costs alpha + n * beta, reducing n bytes costs n * gamma. Parameters are per link class
// (point-to-point inside a node, between nodes) plus the host's memory costs that the
// shared-memory algorithms pay. Defaults describe the machines in docs/machine-notes.md; a tuning
// file written by `kolo-bench --calibrate` (KOLO_TUNING_FILE) replaces them with measurements.
//
// Memory: copy_us and gamma_us are what a core pays on data in its caches (most messages up to
// a few MiB here, and the pieces of the shared-memory algorithms always); copy_mem_us is a
// memcpy past the caches. CopyUs(working set) blends the two by the share of the working set
// that fits in cache_bytes (the node's last-level cache, shared by its ranks): a message whose
// buffers outgrow the cache streams from memory. Point-to-point beta is measured with large
// messages (see bench/calibrate.h), so it already includes what such messages pay.
//
// Units: microseconds and bytes (beta, gamma, copy: microseconds per byte).
#ifndef KOLO_COLLECTIVES_SELECT_COST_MODEL_H_
#define KOLO_COLLECTIVES_SELECT_COST_MODEL_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace kolo {

// Host all-reduce algorithms timed on one layout by `kolo-bench --calibrate`: float32 sum,
// `ranks` ranks on `nodes` nodes of `local_size` ranks each, over the transport `backend`
// (Communicator::BackendName); micros[name][i] is the time of the algorithm called `name`
// (AllreduceAlgorithm::Name) for bytes[i] (ascending). ranks == 0: none.
struct MeasuredAllreduce {
  std::string backend;
  int ranks = 0;
  int nodes = 0;
  int local_size = 0;
  std::vector<double> bytes;
  std::map<std::string, std::vector<double>, std::less<>> micros;  // found by a string_view
};

struct LinkCost {
  double alpha_us = 0;  // start-up of one message
  double beta_us = 0;   // per byte on the wire
};

struct CostModel {
  // Point-to-point between ranks of one node (MPI through its shared-memory transport).
  LinkCost intra = {1.0, 1.0 / 5000.0};
  // Point-to-point between nodes, as each rank gets it while every rank of its node sends
  // across at once: its share of the NIC (a 25 GbE-class NIC: ~3 GB/s achieved, ~5 us latency).
  LinkCost inter = {5.0, 1.0 / 3000.0};
  // How much faster a flow alone between two nodes is than each rank's while all ranks of its
  // node cross at once, both ways (swapping with their partners): a lone flow runs at
  // inter_sharing times inter's bandwidth. The link model sets it to the ranks per NIC (1 where
  // each rank has a NIC of its own); `kolo-bench --calibrate` measures it, and it exceeds the
  // ranks per NIC where sharing costs more than an even split. A flat ring over ranks placed by
  // node has one such flow per node, the trees charge their busiest node's edges at that rate,
  // and hierarchical's cross-node step runs every rank's flow at once
  // (collectives/ALGORITHMS.md).
  double inter_sharing = 1;
  // How much slower the one flow a node sends across runs while its link also carries a flow
  // the other way (a ring's step, a double binary tree's, every exchange): 1 on a full-duplex NIC,
  // the link model's assumption. `kolo-bench --calibrate` measures it as a lone pair's swap
  // against its ping-pong: 1.15-1.16 on links shaped by tc (docs/benchmarks.md, "One flow both
  // ways"). The flows that inter_sharing divides already carry it (inter is measured swapping).
  double inter_duplex = 1;
  // GPU buffers (the NCCL candidates): one step between two GPUs of a node, and a GPU's share
  // of its NIC. Defaults: PCIe Gen3 x16 at NCCL's 12 GB/s and 1 us a hop; a 100 Gbit/s port
  // at NCCL's 12 GB/s and 2 us. With a topology (collectives/select/topology_cost.h) both come from
  // the NVLink/PCIe/NIC link model.
  LinkCost device_intra = {1.0, 1.0 / 12000.0};
  LinkCost device_inter = {2.0, 1.0 / 12000.0};
  // Reducing one byte of a float32 sum from two inputs into one, in cache (ReduceInto).
  double gamma_us = 1.0 / 25000.0;
  // Copying one byte between memory regions in cache (memcpy).
  double copy_us = 1.0 / 40000.0;
  // Copying one byte past the caches (memcpy of buffers far larger than cache_bytes, all ranks
  // of the node at once: ~7 GB/s per rank with 2 ranks here).
  double copy_mem_us = 1.0 / 7000.0;
  // The node's last-level cache (bytes), shared by its ranks.
  double cache_bytes = 32.0 * (1 << 20);
  // One flag barrier among the ranks of a node in shared memory.
  double sync_us = 0.5;
  // The calibration's timings of the host algorithms on its layout. A formula gets the bytes
  // and the steps right but not always what the links make of them: across shaped links
  // kolo's recursive doubling, Rabenseifner and hierarchical ran up to 1.6x slower than theirs
  // at 4 x 1, where libnbc's Rabenseifner (MPI's own) matched its formula (docs/benchmarks.md,
  // "Across nodes"). On that layout the selector scales each timed algorithm's formula to its
  // times (collectives/select/measured_estimate.h).
  MeasuredAllreduce measured_allreduce;
  // Where the numbers come from: "defaults" or the tuning file's path and date.
  std::string source = "defaults";
  // When and where a calibration measured these (written to and read from the file).
  std::string measured;

  // Reads a tuning file (JSON: {"intra": {"alpha_us", "beta_us"}, "inter": {...},
  // "inter_sharing", "inter_duplex", "device_intra": {...}, "device_inter": {...}, "gamma_us",
  // "copy_us", "copy_mem_us", "cache_bytes", "sync_us", "measured_allreduce": {"backend", "ranks",
  // "nodes", "local_size", "bytes": [...], "micros": {name: [...], ...}}}) over `base`: absent keys
  // keep base's values (the topology's link model, or the defaults). kInvalidArgument naming the
  // file and the key on malformed content, kNotFound when it cannot be opened.
  static StatusOr<CostModel> Load(const std::string& path, const CostModel& base);
  static StatusOr<CostModel> Load(const std::string& path);

  // Per byte of a memcpy whose buffers total `working_set` bytes across the node: copy_us while
  // it fits in cache_bytes, tending to copy_mem_us as the cached share cache_bytes/working_set
  // shrinks.
  double CopyUs(double working_set) const;
  // Writes the host figures only: a calibration measures host links, and a device figure
  // written back at its default would override the topology's on the next Load.
  Status Save(const std::string& path) const;
  std::string ToJson(bool with_device = true) const;
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_SELECT_COST_MODEL_H_
