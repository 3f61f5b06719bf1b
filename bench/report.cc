#include "bench/report.h"

#include <cstdarg>
#include <map>
#include <nlohmann/json.hpp>

namespace kolo::bench {
namespace {

// nccl-tests' formats (src/common.cu): the row's parameters, then one group per half.
constexpr const char* kHeader0 =
    "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
    "\n";
constexpr const char* kHeader1 =
    "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s  %s\n";
constexpr const char* kHeader2 =
    "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n";
constexpr const char* kRowParameters = "%12lld  %12lld  %8s  %6s  %6d";
constexpr const char* kRowGroup = "  %7s  %6s  %6s  %5s";

std::string Fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

// nccl-tests: 2 decimals below 100 us, 1 below 10 ms, none above.
std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* format, ...) {
  char text[256];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  return text;
}

std::string Time(double us) { return Fixed(us, us >= 1e4 ? 0 : (us >= 100 ? 1 : 2)); }

std::string Wrong(int64_t wrong) { return wrong < 0 ? "N/A" : std::to_string(wrong); }

nlohmann::json WrongJson(int64_t wrong) {
  return wrong < 0 ? nlohmann::json(nullptr) : nlohmann::json(wrong);
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

void Report::Write(const std::string& text) const {
  if (!root_) return;
  // One write and one flush per row: mpirun forwards what it reads, and a row forwarded in pieces
  // could have a line of stderr land inside it.
  std::fwrite(text.data(), 1, text.size(), out_);
  std::fflush(out_);
}

double Report::AlgBw(int64_t bytes, double time_us) const {
  return time_us > 0 ? static_cast<double>(bytes) / (time_us * 1e3) : 0.0;
}

double Report::BusBw(double algbw) const { return algbw * BusBwFactor(collective_, nranks_); }

void Report::Record(Row row) {
  const InPlaceResult& ip = row.result.in_place;
  for (const auto& [wrong, failed] : {std::make_pair(row.result.wrong, row.result.failed),
                                      std::make_pair(ip.measured ? ip.wrong : -1, ip.failed)}) {
    if (wrong < 0) continue;
    total_wrong_ += wrong;
    total_failed_ += failed >= 0 ? failed : (wrong > 0 ? 1 : 0);
  }
  if (json_ != nullptr && root_) {
    nlohmann::json j;
    j["record"] = "row";
    j["mode"] = row.mode;
    if (row.mode == "model") {
      j["model"] = row.model;
      j["tensors"] = row.tensors;
    } else {
      j["collective"] = CollectiveName(collective_);
      j["root"] = row.root;
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
    j["wrong"] = WrongJson(row.result.wrong);
    if (row.mode == "sweep") {
      const InPlaceResult& ip = row.result.in_place;
      const nlohmann::json none(nullptr);
      j["inplace_time_us"] = ip.measured ? nlohmann::json(ip.time_us) : none;
      j["inplace_time_min_us"] = ip.measured ? nlohmann::json(ip.min_us) : none;
      j["inplace_time_max_us"] = ip.measured ? nlohmann::json(ip.max_us) : none;
      j["inplace_algbw"] = ip.measured ? nlohmann::json(row.in_place_algbw) : none;
      j["inplace_busbw"] = ip.measured ? nlohmann::json(row.in_place_busbw) : none;
      j["inplace_wrong"] = ip.measured ? WrongJson(ip.wrong) : none;
    }
    json_->Write(j);
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

void Report::SweepColumns(Collective collective, const std::vector<std::string>& paths) {
  collective_ = collective;
  sweep_paths_ = paths;
  Print(kHeader0, "", "", "", "", "");
  Print(kHeader1, "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
        "time", "algbw", "busbw", "#wrong", "path");
  Print(kHeader2, "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
        "(GB/s)", "");
}

void Report::SweepRow(const SweepKey& key, const std::vector<PathResult>& results) {
  for (const PathResult& r : results) {
    Row row{"sweep", "", r.path, key.bytes, key.count, 1, key.dtype,
            key.op,  r,  0,      0,         0,         0, key.root};
    row.algbw = AlgBw(key.bytes, r.time_us);
    row.busbw = BusBw(row.algbw);
    std::string line =
        Format(kRowParameters, static_cast<long long>(key.bytes), static_cast<long long>(key.count),
               key.dtype.c_str(), key.op.c_str(), key.root);
    line += Format(kRowGroup, Time(r.time_us).c_str(), Fixed(row.algbw, 2).c_str(),
                   Fixed(row.busbw, 2).c_str(), Wrong(r.wrong).c_str());
    if (r.in_place.measured) {
      row.in_place_algbw = AlgBw(key.bytes, r.in_place.time_us);
      row.in_place_busbw = BusBw(row.in_place_algbw);
      line +=
          Format(kRowGroup, Time(r.in_place.time_us).c_str(), Fixed(row.in_place_algbw, 2).c_str(),
                 Fixed(row.in_place_busbw, 2).c_str(), Wrong(r.in_place.wrong).c_str());
    } else {
      line += Format(kRowGroup, "N/A", "N/A", "N/A", "N/A");
    }
    line += "  " + r.path + "\n";
    Write(line);
    Record(std::move(row));
  }
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
    Row row{"model", m.model, r.path, m.bytes, m.count, m.tensors, m.dtype,
            m.op,    r,       0,      0,       0,       0,         -1};
    row.algbw = AlgBw(m.bytes, r.time_us);
    // The memcpy path reduces nothing: its algbw is the rate it copies at, it has no busbw.
    const bool copy = r.path == "memcpy";
    row.busbw = copy ? 0 : AllreduceBusBwGBs(row.algbw, nranks_);
    Print("  %-16s %10.2f %10.2f %10.2f %8.2f %8s %7s\n", r.path.c_str(), r.time_us / 1e3,
          r.min_us / 1e3, r.max_us / 1e3, row.algbw, copy ? "-" : Fixed(row.busbw, 2).c_str(),
          Wrong(r.wrong).c_str());
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
  std::map<std::string, std::pair<double, int>> busbw;  // sweep rows only, like nccl-tests
  for (const Row& row : rows_) {
    if (row.mode != "sweep") continue;
    auto& [sum, n] = busbw[row.path];
    sum += row.busbw;
    n += 1;
    if (row.result.in_place.measured) {
      sum += row.in_place_busbw;
      n += 1;
    }
  }
  std::string main_path;
  for (const std::string& p : sweep_paths_) {
    if (p == "kolo" || (main_path.empty() && p == sweep_paths_.back())) main_path = p;
  }
  auto mean_of = [&](const std::string& p) {
    const auto it = busbw.find(p);
    return it == busbw.end() || it->second.second == 0 ? 0.0 : it->second.first / it->second.second;
  };
  // nccl-tests' two lines, together; its "0 OK" stands without a check too.
  std::string text = "#\n";
  text += Format("# Out of bounds values : %lld %s\n", static_cast<long long>(total_failed_),
                 total_failed_ == 0 ? "OK" : "FAILED");
  text += Format("# Avg bus bandwidth    : %g \n", mean_of(main_path));
  nlohmann::json summary;
  summary["record"] = "summary";
  summary["out_of_bounds"] = total_failed_;
  summary["wrong_elements"] = total_wrong_;
  summary["checked"] = checked_;
  summary["avg_busbw"] = nlohmann::json::object();
  if (!main_path.empty()) summary["avg_busbw_path"] = main_path;
  for (const std::string& p : sweep_paths_) {
    if (busbw.count(p) == 0) continue;
    summary["avg_busbw"][p] = mean_of(p);
    if (p == main_path) continue;
    text += Format("# avg bus bandwidth of path %s: %g (the line above is path %s's)\n", p.c_str(),
                   mean_of(p), main_path.c_str());
  }
  if (!checked_) text += "# (outputs not checked: -c 0)\n";
  text += "#\n";
  Write(text);
  if (json_ != nullptr && root_) json_->Write(summary);
}

}  // namespace kolo::bench
