// kolo-bench's output: the header (job, MPI, knobs in force), nccl-tests-style sweep rows with one
// column group per path, the model-replay tables, the footer, and --json. Only rank 0 prints and
// writes; every rank may call the functions (they keep the rows on rank 0 only).
#ifndef KOLO_BENCH_REPORT_H_
#define KOLO_BENCH_REPORT_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

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

// One path's result for one row.
struct PathResult {
  std::string path;    // "mpi", "kolo", "mpi-per-tensor", "mpi-fused"
  double time_us = 0;  // median
  double min_us = 0;   // over the samples the median was taken of
  double max_us = 0;
  int64_t wrong = -1;  // summed over ranks; -1 when not checked (-c 0)
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

  // A sweep table: columns for each path, then the kolo/mpi time ratio when both are there.
  void SweepColumns(const std::vector<std::string>& paths);
  void SweepRow(int64_t bytes, int64_t count, const std::string& dtype, const std::string& op,
                const std::vector<PathResult>& results);

  void Model(const ModelResult& result);

  // nccl-tests' closing lines: total #wrong (OK / FAILED) and the mean busbw per path.
  void Footer();
  int64_t total_wrong() const { return total_wrong_; }

  // Every row so far plus the header's facts. False with *error set when the file can't be written.
  bool WriteJson(const std::string& path, const RunInfo& info, std::string* error) const;

 private:
  std::string ratio_base_ = "mpi";  // the sweep's baseline path (SweepColumns)
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
  };

  double AlgBw(int64_t bytes, double time_us) const;  // GB/s
  double BusBw(double algbw) const;                   // algbw * 2(n-1)/n, all-reduce
  void Record(Row row);
  void Print(const char* format, ...) const __attribute__((format(printf, 2, 3)));

  bool root_;
  int nranks_;
  FILE* out_;
  std::vector<std::string> sweep_paths_;
  std::vector<Row> rows_;
  int64_t total_wrong_ = 0;
  bool any_checked_ = false;
};

}  // namespace kolo::bench

#endif  // KOLO_BENCH_REPORT_H_
