// Which run kolo-bench makes, from --device, --model, --negotiation and --paths, checked before
// any MPI or GPU work starts, so a bad combination is a clear usage error (exit 2) on every
// machine, with or without a GPU:
//
//   --device host            sweep: paths mpi,kolo      --model: kolo,mpi-per-tensor,mpi-fused,
//                                                                memcpy
//   --device cuda            sweep: paths nccl,kolo     --model: kolo,nccl-per-tensor,nccl-fused
//
// On the device the sweep's paths are fixed (both always run; --paths is refused); --negotiation
// is host-only. Pure logic: unit-tested in tests/unit/bench_mode_test.cc.
#ifndef KOLO_BENCH_MODE_H_
#define KOLO_BENCH_MODE_H_

#include <string>
#include <vector>

#include "bench/models.h"

namespace kolo::bench {

struct ModeFlags {
  std::string device = "host";  // "host" or "cuda" (CLI11 already refused anything else)
  std::string model;            // empty: the size sweep
  bool negotiation = false;
  std::string paths;  // --paths, comma list; empty: the mode's default
};

struct Mode {
  bool on_device = false;
  bool replay = false;             // --model
  ModelLayout model;               // when replay
  std::vector<std::string> paths;  // the paths to run, in order
};

// The paths a mode knows, in their default order.
std::vector<std::string> KnownPaths(bool replay, bool on_device);
// "a,b,,c" -> {"a", "b", "c"} (empty items dropped): the flags' comma lists.
std::vector<std::string> SplitCommas(const std::string& text);

// Fills *mode and returns "" when the flags make sense together; otherwise the message of the
// usage error ("unknown --model 'x'; one of resnet50 bert-base tiny-1000").
std::string ChooseMode(const ModeFlags& flags, Mode* mode);

}  // namespace kolo::bench

#endif  // KOLO_BENCH_MODE_H_
