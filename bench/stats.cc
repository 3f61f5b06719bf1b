#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace kolo::bench {
namespace {

std::string Number(double value, bool known) {
  if (!known || !std::isfinite(value)) return "";
  char text[64];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

}  // namespace

double AlgBwGBs(int64_t bytes, double time_us) {
  return time_us > 0 ? static_cast<double>(bytes) / (time_us * 1e3) : 0.0;
}

double AllreduceBusBwGBs(double algbw, int ranks) {
  return ranks >= 1 ? algbw * 2.0 * (ranks - 1) / ranks : 0.0;
}

namespace {

struct CollectiveNames {
  Collective collective;
  const char* name;
  const char* nccl_name;  // nccl-tests' file and executable stem
};

constexpr CollectiveNames kCollectives[] = {
    {Collective::kAllreduce, "allreduce", "all_reduce"},
    {Collective::kAllgather, "allgather", "all_gather"},
    {Collective::kBroadcast, "broadcast", "broadcast"},
    {Collective::kReducescatter, "reducescatter", "reduce_scatter"},
    {Collective::kAlltoall, "alltoall", "alltoall"},
};

}  // namespace

const char* CollectiveName(Collective c) {
  for (const CollectiveNames& n : kCollectives) {
    if (n.collective == c) return n.name;
  }
  return "?";
}

bool ParseCollective(const std::string& text, Collective* c) {
  for (const CollectiveNames& n : kCollectives) {
    if (text == n.name || text == n.nccl_name || text == std::string(n.nccl_name) + "_perf") {
      *c = n.collective;
      return true;
    }
  }
  return false;
}

bool CollectiveFromProgramName(const std::string& argv0, Collective* c) {
  const size_t slash = argv0.find_last_of('/');
  const std::string base = slash == std::string::npos ? argv0 : argv0.substr(slash + 1);
  for (const CollectiveNames& n : kCollectives) {
    if (base == std::string(n.nccl_name) + "_perf") {
      *c = n.collective;
      return true;
    }
  }
  return false;
}

std::string CollectiveNameList() {
  std::string list;
  for (const CollectiveNames& n : kCollectives)
    list += (list.empty() ? "" : "|") + std::string(n.name);
  return list;
}

bool CollectiveReduces(Collective c) {
  return c == Collective::kAllreduce || c == Collective::kReducescatter;
}

bool CollectiveHasRoot(Collective c) { return c == Collective::kBroadcast; }

CollectiveLayout LayoutFor(Collective c, int64_t size, int64_t type_size, int ranks) {
  CollectiveLayout l;
  const int64_t n = std::max(1, ranks);
  const int64_t elements = type_size > 0 && size > 0 ? size / type_size : 0;
  // The per-rank count of the last three, rounded down to a multiple of 16 bytes.
  const int64_t align = type_size > 0 && type_size < 16 ? 16 / type_size : 1;
  const int64_t base = elements / n / align * align;
  switch (c) {
    case Collective::kAllreduce:
    case Collective::kBroadcast:
      l.count = l.send = l.recv = elements;
      break;
    case Collective::kAllgather:
      l.count = l.send = base;
      l.recv = base * n;
      break;
    case Collective::kReducescatter:
      l.count = l.recv = base;
      l.send = base * n;
      break;
    case Collective::kAlltoall:
      l.count = base;
      l.send = l.recv = base * n;
      break;
  }
  l.bytes = std::max(l.send, l.recv) * std::max<int64_t>(type_size, 0);
  return l;
}

double BusBwFactor(Collective c, int ranks) {
  if (ranks < 1) return 0.0;
  switch (c) {
    case Collective::kAllreduce:
      return 2.0 * (ranks - 1) / ranks;
    case Collective::kBroadcast:
      return 1.0;
    default:
      return static_cast<double>(ranks - 1) / ranks;
  }
}

const char* RankCombineName(RankCombine mode) {
  switch (mode) {
    case RankCombine::kRank0:
      return "rank 0's";
    case RankCombine::kAverage:
      return "the mean over ranks";
    case RankCombine::kMin:
      return "the min over ranks";
    default:
      return "the max over ranks";
  }
}

LineFit FitLine(const std::vector<double>& x, const std::vector<double>& y,
                const std::vector<double>& weights) {
  LineFit fit;
  const size_t n = std::min(x.size(), y.size());
  if (n < 2 || (!weights.empty() && weights.size() < n)) return fit;
  auto w = [&](size_t i) { return weights.empty() ? 1.0 : weights[i]; };
  double sum_w = 0, mean_x = 0, mean_y = 0;
  for (size_t i = 0; i < n; ++i) {
    sum_w += w(i);
    mean_x += w(i) * x[i];
    mean_y += w(i) * y[i];
  }
  if (!(sum_w > 0)) return fit;
  mean_x /= sum_w;
  mean_y /= sum_w;
  // Centred sums: the sizes span 8 B to MiBs, so the textbook n*sum(x^2) - sum(x)^2 cancels.
  double sxx = 0, sxy = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxx += w(i) * (x[i] - mean_x) * (x[i] - mean_x);
    sxy += w(i) * (x[i] - mean_x) * (y[i] - mean_y);
    syy += w(i) * (y[i] - mean_y) * (y[i] - mean_y);
  }
  if (sxx <= 0) return fit;
  fit.slope = sxy / sxx;
  fit.intercept = mean_y - fit.slope * mean_x;
  fit.r2 = syy > 0 ? (sxy * sxy) / (sxx * syy) : 1.0;
  fit.ok = true;
  return fit;
}

int BlockIters(double per_call_us, double target_us, int max_iters) {
  max_iters = std::max(1, max_iters);
  if (!(per_call_us > 0)) return max_iters;
  const double fit = std::floor(target_us / per_call_us);
  return static_cast<int>(std::clamp(fit, 1.0, static_cast<double>(max_iters)));
}

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

void WriteAlgorithmsCsv(std::ostream& out, const std::vector<std::string>& comments,
                        const std::vector<AlgorithmRow>& rows) {
  for (const std::string& c : comments) out << "# " << c << "\n";
  out << "ranks,bytes,count,algorithm,supported,time_us,min_us,max_us,iters,algbw_gbs,"
         "busbw_gbs,vs_mpi,wrong,model_us,selected,bound_fraction,reason\n";
  for (const AlgorithmRow& r : rows) {
    const bool t = r.supported;
    out << r.ranks << ',' << r.bytes << ',' << r.count << ',' << CsvField(r.algorithm) << ','
        << (r.supported ? 1 : 0) << ',' << Number(r.time_us, t) << ',' << Number(r.min_us, t) << ','
        << Number(r.max_us, t) << ',' << (t ? std::to_string(r.iters) : "") << ','
        << Number(r.algbw, t) << ',' << Number(r.busbw, t) << ','
        << Number(r.vs_mpi, t && r.vs_mpi > 0) << ','
        << (t && r.wrong >= 0 ? std::to_string(r.wrong) : "") << ','
        << Number(r.model_us, r.model_us >= 0) << ',' << (r.selected ? 1 : 0) << ','
        << Number(r.bound_fraction, t && r.bound_fraction >= 0) << ',' << CsvField(r.reason)
        << "\n";
  }
}

}  // namespace kolo::bench
