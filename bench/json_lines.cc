#include "bench/json_lines.h"

#include <cerrno>
#include <cstring>

#include "bench/report.h"

namespace kolo::bench {

std::unique_ptr<JsonLines> JsonLines::Open(bool root, const std::string& path, std::string* error) {
  if (!root) return std::unique_ptr<JsonLines>(new JsonLines(nullptr, path));
  FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) {
    *error = "cannot open '" + path + "' for writing: " + std::strerror(errno);
    return nullptr;
  }
  return std::unique_ptr<JsonLines>(new JsonLines(file, path));
}

JsonLines::~JsonLines() {
  if (file_ != nullptr) std::fclose(file_);
}

void JsonLines::Write(const nlohmann::json& record) {
  if (file_ == nullptr || failed_) return;
  const std::string line = record.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    failed_ = true;
    std::fprintf(stderr, "kolo-bench: --json: write to '%s' failed: %s\n", path_.c_str(),
                 std::strerror(errno));
  }
}

nlohmann::json JsonLines::RunRecord(const RunInfo& info) {
  nlohmann::json doc;
  doc["record"] = "run";
  doc["tool"] = "kolo-bench";
  doc["version"] = info.version;
  doc["command"] = info.command_line;
  doc["ranks"] = info.ranks;
  doc["hosts"] = nlohmann::json::object();
  for (const auto& [host, ranks] : info.hosts) doc["hosts"][host] = ranks;
  doc["local_size"] = info.local_size;
  doc["cross_size"] = info.cross_size;
  doc["mpi"] = info.mpi_library;
  doc["thread_level"] = info.thread_level;
  doc["env"] = nlohmann::json::object();
  for (const auto& [name, value] : info.env) doc["env"][name] = value;
  return doc;
}

}  // namespace kolo::bench
