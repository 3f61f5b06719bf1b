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
