#include "bench/report.h"

#include <cstdarg>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

namespace kolo::bench {
namespace {

// Widths: a row starts with size, count, type, redop; each path adds time, algbw, busbw, #wrong.
constexpr const char* kPrefixHeader1 = "#%12s %12s %8s %6s";
constexpr const char* kGroupFormat = " %10s %7s %7s %6s";
constexpr int kGroupWidth = 1 + 10 + 1 + 7 + 1 + 7 + 1 + 6;

std::string Fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

// nccl-tests prints times with 2 decimals, fewer when large.
std::string Time(double us) { return Fixed(us, us < 1e4 ? 2 : (us < 1e6 ? 1 : 0)); }

std::string Wrong(int64_t wrong) { return wrong < 0 ? "N/A" : std::to_string(wrong); }

std::string Centered(const std::string& text, int width) {
  if (static_cast<int>(text.size()) >= width) return text;
  const int left = (width - static_cast<int>(text.size())) / 2;
  return std::string(left, ' ') + text + std::string(width - left - text.size(), ' ');
}

const PathResult* FindPath(const std::vector<PathResult>& results, const std::string& path) {
  for (const PathResult& r : results) {
    if (r.path == path) return &r;
  }
  return nullptr;
}

}  // namespace

Report::Report(bool root, int nranks, FILE* out) : root_(root), nranks_(nranks), out_(out) {}

void Report::Print(const char* format, ...) const {
  if (!root_) return;
  va_list args;
  va_start(args, format);
  std::vfprintf(out_, format, args);
  va_end(args);
  std::fflush(out_);
}

double Report::AlgBw(int64_t bytes, double time_us) const {
  return time_us > 0 ? static_cast<double>(bytes) / (time_us * 1e3) : 0.0;
}

double Report::BusBw(double algbw) const {
  return nranks_ > 0 ? algbw * 2.0 * (nranks_ - 1) / nranks_ : 0.0;
}

void Report::Record(Row row) {
  if (row.result.wrong >= 0) {
    total_wrong_ += row.result.wrong;
    any_checked_ = true;
  }
  rows_.push_back(std::move(row));
}

void Report::Header(const RunInfo& info) {
  Print("# kolo-bench %s: %s\n", info.version.c_str(), info.command_line.c_str());
  std::string hosts;
  for (const auto& [host, ranks] : info.hosts) {
    hosts += (hosts.empty() ? "" : ", ") + host + " (" + std::to_string(ranks) + ")";
  }
  Print("# ranks %d on %zu host(s): %s; ", info.ranks, info.hosts.size(), hosts.c_str());
  if (info.local_size > 0) {
    Print("kolo: local_size %d, cross_size %d\n", info.local_size, info.cross_size);
  } else {
    Print("kolo: not started (no kolo path)\n");
  }
  Print("# MPI: %s, %s\n", info.mpi_library.c_str(), info.thread_level.c_str());
  if (info.env.empty()) {
    Print("# env: no KOLO_*/HOROVOD_*/MALLOC_*/OMPI_MCA_* variables set (kolo's defaults)\n");
  } else {
    for (const auto& [name, value] : info.env) Print("# env: %s=%s\n", name.c_str(), value.c_str());
  }
}

void Report::Note(const std::string& line) { Print("# %s\n", line.c_str()); }

void Report::SweepColumns(const std::vector<std::string>& paths) {
  sweep_paths_ = paths;
  auto has = [&](const char* name) {
    for (const std::string& p : paths) {
      if (p == name) return true;
    }
    return false;
  };
  // kolo's time over the baseline's: MPI_Allreduce on host buffers, ncclAllReduce on device ones.
  const char* base = has("nccl") ? "nccl" : "mpi";
  const bool ratio = has(base) && has("kolo");
  ratio_base_ = base;
  std::string line = "#" + std::string(12 + 1 + 12 + 1 + 8 + 1 + 6, ' ');
  for (const std::string& p : paths) line += " " + Centered(p, kGroupWidth - 1);
  Print("%s\n", line.c_str());
  Print(kPrefixHeader1, "size", "count", "type", "redop");
  for (size_t i = 0; i < paths.size(); ++i) Print(kGroupFormat, "time", "algbw", "busbw", "#wrong");
  Print("%s\n", ratio ? (std::string("  kolo/") + base).c_str() : "");
  Print(kPrefixHeader1, "(B)", "(elements)", "", "");
  for (size_t i = 0; i < paths.size(); ++i) Print(kGroupFormat, "(us)", "(GB/s)", "(GB/s)", "");
  Print("%s\n", ratio ? "   (time)" : "");
}

void Report::SweepRow(int64_t bytes, int64_t count, const std::string& dtype, const std::string& op,
                      const std::vector<PathResult>& results) {
  Print(" %12lld %12lld %8s %6s", static_cast<long long>(bytes), static_cast<long long>(count),
        dtype.c_str(), op.c_str());
  for (const PathResult& r : results) {
    Row row{"sweep", "", r.path, bytes, count, 1, dtype, op, r, 0, 0};
    row.algbw = AlgBw(bytes, r.time_us);
    row.busbw = BusBw(row.algbw);
    Print(kGroupFormat, Time(r.time_us).c_str(), Fixed(row.algbw, 2).c_str(),
          Fixed(row.busbw, 2).c_str(), Wrong(r.wrong).c_str());
    Record(std::move(row));
  }
  const PathResult* base = FindPath(results, ratio_base_);
  const PathResult* kolo = FindPath(results, "kolo");
  if (base != nullptr && kolo != nullptr && base->time_us > 0) {
    Print(" %9s", Fixed(kolo->time_us / base->time_us, 2).c_str());
  }
  Print("\n");
}

void Report::Model(const ModelResult& m) {
  Print("#\n# model %s: %s; %d tensors, %lld elements (%.1f MiB), %s %s, %d ranks\n",
        m.model.c_str(), m.description.c_str(), m.tensors, static_cast<long long>(m.count),
        static_cast<double>(m.bytes) / (1 << 20), m.dtype.c_str(), m.op.c_str(), nranks_);
  Print(
      "# per step: every tensor submitted in backward order (last layer first); median of %d "
      "steps after %d warmup, paths interleaved\n",
      m.steps, m.warmup);
  Print("# %-16s %10s %10s %10s %8s %8s %7s\n", "path", "time(ms)", "min(ms)", "max(ms)", "algbw",
        "busbw", "#wrong");
  Print("# %-16s %10s %10s %10s %8s %8s %7s\n", "", "median", "", "", "(GB/s)", "(GB/s)", "");
  for (const PathResult& r : m.paths) {
    Row row{"model", m.model, r.path, m.bytes, m.count, m.tensors, m.dtype, m.op, r, 0, 0};
    row.algbw = AlgBw(m.bytes, r.time_us);
    row.busbw = BusBw(row.algbw);
    Print("  %-16s %10.2f %10.2f %10.2f %8.2f %8.2f %7s\n", r.path.c_str(), r.time_us / 1e3,
          r.min_us / 1e3, r.max_us / 1e3, row.algbw, row.busbw, Wrong(r.wrong).c_str());
    Record(std::move(row));
  }
  const PathResult* kolo = FindPath(m.paths, "kolo");
  if (kolo == nullptr) return;
  std::string ratios;
  for (const PathResult& r : m.paths) {
    if (&r == kolo || r.time_us <= 0) continue;
    ratios += "  kolo / " + r.path + " = " + Fixed(kolo->time_us / r.time_us, 2);
  }
  if (!ratios.empty()) Print("# time ratio:%s\n", ratios.c_str());
}

void Report::Footer() {
  Print("#\n");
  if (any_checked_) {
    Print("# Out of bounds values : %lld %s\n", static_cast<long long>(total_wrong_),
          total_wrong_ == 0 ? "OK" : "FAILED");
  } else {
    Print("# Out of bounds values : not checked (-c 0)\n");
  }
  std::map<std::string, std::pair<double, int>> busbw;  // sweep rows only, like nccl-tests
  for (const Row& row : rows_) {
    if (row.mode != "sweep") continue;
    busbw[row.path].first += row.busbw;
    busbw[row.path].second += 1;
  }
  for (const std::string& p : sweep_paths_) {
    const auto it = busbw.find(p);
    if (it == busbw.end()) continue;
    Print("# Avg bus bandwidth    : %-5s %.4f GB/s\n", p.c_str(),
          it->second.first / it->second.second);
  }
  Print("#\n");
}

bool Report::WriteJson(const std::string& path, const RunInfo& info, std::string* error) const {
  if (!root_) return true;
  nlohmann::json doc;
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
  doc["rows"] = nlohmann::json::array();
  for (const Row& row : rows_) {
    nlohmann::json j;
    j["mode"] = row.mode;
    if (!row.model.empty()) {
      j["model"] = row.model;
      j["tensors"] = row.tensors;
    }
    j["path"] = row.path;
    j["bytes"] = row.bytes;
    j["count"] = row.count;
    j["dtype"] = row.dtype;
    j["op"] = row.op;
    j["time_us"] = row.result.time_us;
    j["time_min_us"] = row.result.min_us;
    j["time_max_us"] = row.result.max_us;
    j["algbw"] = row.algbw;
    j["busbw"] = row.busbw;
    j["wrong"] = row.result.wrong < 0 ? nlohmann::json(nullptr) : nlohmann::json(row.result.wrong);
    doc["rows"].push_back(std::move(j));
  }
  std::ofstream file(path);
  if (!file) {
    *error = "cannot open '" + path + "' for writing";
    return false;
  }
  file << doc.dump(2) << "\n";
  if (!file.good()) {
    *error = "write to '" + path + "' failed";
    return false;
  }
  return true;
}

}  // namespace kolo::bench
