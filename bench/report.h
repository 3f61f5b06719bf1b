// kolo-bench's output: the header (job, MPI, knobs in force), the sweep rows in nccl-tests' layout
// (one row per size and path: size count type redop root, out-of-place time algbw busbw #wrong,
// in-place the same, then the path's name), the model-replay tables, nccl-tests' closing lines,
// and --json records as each row is made. Only rank 0 prints and writes; every rank may call the
// functions (they keep the rows on rank 0 only).
#ifndef KOLO_BENCH_REPORT_H_
#define KOLO_BENCH_REPORT_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "bench/json_lines.h"
#include "bench/stats.h"

namespace kolo::bench {

struct RunInfo {
  std::string version;  // "0.1.0"
  std::string command_line;
  int ranks = 0;
  std::vector<std::pair<std::string, int>> hosts;  // host, ranks on it (in rank order)
  int local_size = 0;                              // kolo's view of the node layout
  int cross_size = 0;
  std::string mpi_library;                               // first line of MPI_Get_library_version
  std::string thread_level;                              // "MPI_THREAD_MULTIPLE"
  std::vector<std::pair<std::string, std::string>> env;  // KOLO_*, HOROVOD_*, MALLOC_*, OMPI_MCA_*
};

// The in-place half of a sweep row: the input buffer is the output buffer.
struct InPlaceResult {
  bool measured = false;  // false: the path has no in-place form (printed N/A)
  double time_us = 0;
  double min_us = 0;
  double max_us = 0;
  int64_t wrong = -1;
  int64_t failed = -1;  // ranks with any wrong element; -1: 1 when wrong > 0
};

// One path's result for one row (out of place; a sweep row also has the in-place half).
struct PathResult {
  std::string path;    // "mpi", "kolo", "mpi-per-tensor", "mpi-fused"
  double time_us = 0;  // median
  double min_us = 0;   // over the samples the median was taken of
  double max_us = 0;
  int64_t wrong = -1;  // summed over ranks; -1 when not checked (-c 0)
  int64_t failed = -1;  // ranks with any wrong element (nccl-tests' error count); -1: wrong > 0
  InPlaceResult in_place;
};

// What a sweep row prints before its timings.
struct SweepKey {
  int64_t bytes = 0;  // nccl-tests' size column (LayoutFor)
  int64_t count = 0;
  std::string dtype;
  std::string op;  // "none" for collectives without a reduction
  int root = -1;   // -1 for collectives without a root
};

// A model replay: the layout and one result per path.
struct ModelResult {
  std::string model;
  std::string description;
  int tensors = 0;
  int64_t count = 0;  // elements
  int64_t bytes = 0;
  std::string dtype;
  std::string op;
  int steps = 0;
  int warmup = 0;
  std::vector<PathResult> paths;
};

class Report {
 public:
  Report(bool root, int nranks, FILE* out);

  void Header(const RunInfo& info);
  void Note(const std::string& line);  // "# line"
  // Whether outputs are checked (-c); the closing lines say so when not. Default true.
  void SetChecked(bool checked) { checked_ = checked; }

  // Rows and records go to `json` too (may be null; not owned).
  void SetJson(JsonLines* json) { json_ = json; }
  // The sweep's collective (its busbw factor; all-reduce unless set) and nccl-tests' header.
  void SweepColumns(Collective collective, const std::vector<std::string>& paths);
  void SweepColumns(const std::vector<std::string>& paths) {
    SweepColumns(Collective::kAllreduce, paths);
  }
  // One row per path.
  void SweepRow(const SweepKey& key, const std::vector<PathResult>& results);
  void SweepRow(int64_t bytes, int64_t count, const std::string& dtype, const std::string& op,
                const std::vector<PathResult>& results) {
    SweepRow(SweepKey{bytes, count, dtype, op, -1}, results);
  }

  void Model(const ModelResult& result);

  // nccl-tests' closing lines, always both: "# Out of bounds values : N OK|FAILED" (N counts,
  // as nccl-tests does, one per rank, size, path and half with any wrong element; #wrong per row
  // counts elements) and "# Avg bus bandwidth    : X " (the mean busbw, out-of-place and
  // in-place, of kolo's path, or of the only path when kolo is not run; 0 without rows). Lines of
  // kolo-bench's own follow them: the other paths' means ("# avg bus bandwidth of path mpi: X")
  // and "(outputs not checked: -c 0)".
  void Footer();
  int64_t total_wrong() const { return total_wrong_; }

 private:
  struct Row {
    std::string mode;   // "sweep" | "model"
    std::string model;  // "" for sweep rows
    std::string path;
    int64_t bytes = 0;
    int64_t count = 0;
    int tensors = 1;
    std::string dtype;
    std::string op;
    PathResult result;
    double algbw = 0;
    double busbw = 0;
    double in_place_algbw = 0;
    double in_place_busbw = 0;
    int root = -1;
  };

  double AlgBw(int64_t bytes, double time_us) const;  // GB/s
  double BusBw(double algbw) const;                   // algbw * the collective's factor
  void Record(Row row);
  void Print(const char* format, ...) const __attribute__((format(printf, 2, 3)));
  void Write(const std::string& text) const;  // rank 0: one fwrite, one fflush

  bool root_;
  int nranks_;
  FILE* out_;
  Collective collective_ = Collective::kAllreduce;
  JsonLines* json_ = nullptr;
  std::vector<std::string> sweep_paths_;
  std::vector<Row> rows_;
  int64_t total_wrong_ = 0;   // wrong elements
  int64_t total_failed_ = 0;  // nccl-tests' errors
  bool checked_ = true;
};

}  // namespace kolo::bench

#endif  // KOLO_BENCH_REPORT_H_
