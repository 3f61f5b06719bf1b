// --json FILE: JSON Lines (one JSON object per line), written by rank 0 as the run goes and
// flushed after every line, so a sweep stopped with Ctrl-C keeps the rows it printed. Every
// object has "record": the first line is "run" (the header's facts: version, command, ranks,
// hosts, MPI, environment), then one "row" per printed row (a sweep's size and path, a model
// replay's path, a --negotiation setting, a -a algorithm at one size; "mode" says which), and
// last "summary" (out-of-bounds count and average bus bandwidth) when the run ends normally.
#ifndef KOLO_BENCH_JSON_LINES_H_
#define KOLO_BENCH_JSON_LINES_H_

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

namespace kolo::bench {

struct RunInfo;

class JsonLines {
 public:
  // Opens (truncates) `path` for writing when `root`; otherwise a writer that writes nothing.
  // Null with *error set when the file cannot be opened.
  static std::unique_ptr<JsonLines> Open(bool root, const std::string& path, std::string* error);
  ~JsonLines();
  JsonLines(const JsonLines&) = delete;
  JsonLines& operator=(const JsonLines&) = delete;

  // One line, flushed. A failed write (disk full, ...) is said once on stderr; later records are
  // dropped and failed() turns true.
  void Write(const nlohmann::json& record);
  bool failed() const { return failed_; }

  // The "run" record.
  static nlohmann::json RunRecord(const RunInfo& info);

 private:
  JsonLines(FILE* file, std::string path) : file_(file), path_(std::move(path)) {}
  FILE* file_;  // null on ranks other than 0
  std::string path_;
  bool failed_ = false;
};

}  // namespace kolo::bench

#endif  // KOLO_BENCH_JSON_LINES_H_
