// kolo-bench's command line: nccl-tests' flags (-b -e -i -f -n -w -c -o -d -r -z -a -g -t -m), its
// own (--collective, --paths, --model, --negotiation, -a ALGORITHMS, --device, --json, ...), and
// every check that needs no MPI, made before MPI_Init: a usage error is one line on stderr and
// exit status 2, printed once (by the process that is rank 0, or the only one); --help and
// --version print and exit 0. See bench/main.cc for the modes.
#ifndef KOLO_BENCH_FLAGS_H_
#define KOLO_BENCH_FLAGS_H_

#include <string>
#include <vector>

#include "bench/dtypes.h"
#include "bench/mode.h"
#include "bench/stats.h"
#include "bench/sweep.h"

namespace kolo::bench {

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
  int root = 0;
  std::string collective;  // empty: from the executable's name, else allreduce
  int ngpus = 1;
  int nthreads = 1;
  int agg_iters = 1;
  int blocking = 0;
  int average = -1;  // --average; -1: not given
  std::string paths;
  std::string model;
  std::string json;
  bool no_progress = false;
  bool negotiation = false;
  std::string tensors = "1,100,1000";
  std::string algorithms;
  std::string transport = "mpi";  // -a: mpi, or ucx (the algorithms over UCX too)
  bool calibrate = false;
  std::string device = "host";
  std::string output;
  bool version = false;
  bool layout = false;  // --layout: print --model's tensors and exit
};

struct Config {
  Flags flags;
  std::vector<const DtypeInfo*> dtypes;
  std::vector<const OpInfo*> ops;
  Mode mode;
  SweepOptions sweep;                   // sizes, timing, check, collective, -a, -z
  std::vector<std::string> algorithms;  // -a NAMES: registry names or {"all"}
  std::vector<int> tensors;             // --negotiation
};

// "8", "64K", "64M", "1G", "1GB" (binary units, like nccl-tests). False on anything else.
bool ParseBytes(std::string text, int64_t* bytes);

// "0.1.0"
std::string VersionString();

// Parses and checks the command line. Returns -1 to go on with *config filled, or the exit status
// (0 after --help or --version, 2 after a usage error) once it has printed.
int ParseCommandLine(int argc, char** argv, Config* config);

}  // namespace kolo::bench

#endif  // KOLO_BENCH_FLAGS_H_
