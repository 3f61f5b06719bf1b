#include "runtime/world/agreements.h"

#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "base/logging.h"  // fmt

namespace kolo {
namespace {

// The lowest rank holding the smallest (`want_max` false) or largest value: MPI_MINLOC's and
// MPI_MAXLOC's answer, which the messages have always named.
std::pair<int64_t, int> Extreme(const std::vector<int64_t>& values, bool want_max) {
  std::pair<int64_t, int> best{values[0], 0};
  for (size_t r = 1; r < values.size(); ++r) {
    if (want_max ? values[r] > best.first : values[r] < best.first) {
      best = {values[r], static_cast<int>(r)};
    }
  }
  return best;
}

}  // namespace

Status AgreeOnStart(Bootstrap& bootstrap, const Status& local, const Config& config) {
  // Knobs that shape what crosses the wire: a rank with another value would corrupt results
  // (chunk pieces; fusion, which every rank plans on its own from the same Responses, so a
  // rank with another threshold or direct size makes other calls) or misread the negotiation
  // (cache slots).
  const std::pair<const char*, int64_t> shared[] = {
      {"KOLO_FUSION_CHUNK_BYTES", config.fusion_chunk_bytes},
      {"KOLO_FUSION_THRESHOLD", config.fusion_threshold_bytes},
      {"KOLO_FUSION_DIRECT_BYTES", config.fusion_direct_bytes},
      {"KOLO_CACHE_CAPACITY", config.cache_capacity},
  };
  // One all-gather: whether each rank's own start succeeded, then its value of each knob.
  std::ostringstream mine;
  mine << (local.ok() ? 1 : 0);
  for (const auto& knob : shared) mine << ' ' << knob.second;
  std::vector<std::string> all;
  Status exchanged = bootstrap.AllgatherBytes(mine.str(), &all);
  if (!local.ok()) return Status(local).AddContext("kolo_init");
  KOLO_RETURN_IF_ERROR(exchanged);
  const size_t n = all.size();
  std::vector<std::vector<int64_t>> values(std::size(shared), std::vector<int64_t>(n));
  for (size_t r = 0; r < n; ++r) {
    std::istringstream in(all[r]);
    int ok = 0;
    in >> ok;
    if (!ok) {
      return FailedPreconditionError(
          fmt::format("kolo_init: rank {} could not start kolo (see its error); no rank starts",
                      r));
    }
    for (auto& knob : values) in >> knob[r];
  }
  // A value as its variable spells it: KOLO_FUSION_DIRECT_BYTES's "auto" is held as -1.
  auto spelled = [](int64_t v) {
    return v == kFusionDirectAuto ? std::string("auto") : std::to_string(v);
  };
  for (size_t k = 0; k < std::size(shared); ++k) {
    const auto lo = Extreme(values[k], /*want_max=*/false);
    const auto hi = Extreme(values[k], /*want_max=*/true);
    if (lo.first != hi.first) {
      return InvalidArgumentError(
          fmt::format("kolo_init: {} must be the same on every rank: rank {} has {}, "
                      "rank {} has {}",
                      shared[k].first, lo.second, spelled(lo.first), hi.second, spelled(hi.first)));
    }
  }
  return Status::OK();
}

}  // namespace kolo
