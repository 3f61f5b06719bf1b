// Hockney's alpha-beta-gamma cost model (Hockney 1994; the per-algorithm formulas of Thakur,
// Rabenseifner & Gropp 2005, sec. 4, and collectives/ALGORITHMS.md): sending n bytes over a
// link costs alpha + n * beta, reducing n bytes costs n * gamma. Parameters are per link class
// (point-to-point inside a node, between nodes) plus the host's memory costs that the
// shared-memory algorithms pay. Defaults describe the machines in MACHINE-NOTES.md; a tuning
// file written by `kolo-bench --calibrate` (KOLO_TUNING_FILE) replaces them with measurements.
//
// Units: microseconds and bytes (beta, gamma, copy: microseconds per byte).
#ifndef KOLO_COLLECTIVES_COST_MODEL_H_
#define KOLO_COLLECTIVES_COST_MODEL_H_

#include <string>

#include "base/status.h"

namespace kolo {

struct LinkCost {
  double alpha_us = 0;  // start-up of one message
  double beta_us = 0;   // per byte on the wire
};

struct CostModel {
  // Point-to-point between ranks of one node (MPI through its shared-memory transport).
  LinkCost intra = {1.0, 1.0 / 5000.0};
  // Point-to-point between nodes (a 25 GbE-class NIC: ~3 GB/s achieved, ~5 us latency).
  LinkCost inter = {5.0, 1.0 / 3000.0};
  // Reducing one byte of a float32 sum from two inputs into one (ReduceInto, ~11 GB/s).
  double gamma_us = 1.0 / 11000.0;
  // Copying one byte between memory regions (memcpy, ~15 GB/s on one core).
  double copy_us = 1.0 / 15000.0;
  // One flag barrier among the ranks of a node in shared memory.
  double sync_us = 0.5;
  // Where the numbers come from: "defaults" or the tuning file's path and date.
  std::string source = "defaults";
  // When and where a calibration measured these (written to and read from the file).
  std::string measured;

  // Reads a tuning file (JSON: {"intra": {"alpha_us", "beta_us"}, "inter": {...},
  // "gamma_us", "copy_us", "sync_us"}); absent keys keep their defaults. kInvalidArgument
  // naming the file and the key on malformed content, kNotFound when it cannot be opened.
  static StatusOr<CostModel> Load(const std::string& path);
  Status Save(const std::string& path) const;
  std::string ToJson() const;
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_COST_MODEL_H_
