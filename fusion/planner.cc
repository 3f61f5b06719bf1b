#include "fusion/planner.h"

#include <map>
#include <tuple>

namespace kolo {

int64_t ResponseBytes(const Response& r) {
  int64_t n = 0;
  for (int64_t c : r.counts) n += c;
  return n * static_cast<int64_t>(DataTypeSize(r.dtype));
}

std::vector<Response> FuseResponses(std::vector<Response> responses, int64_t threshold_bytes,
                                    int64_t direct_bytes) {
  using Key = std::tuple<uint8_t, uint8_t, double, double, int32_t>;
  std::vector<Response> out;
  out.reserve(responses.size());
  std::map<Key, size_t> open;  // key -> index in `out` of the group still accepting members
  std::map<Key, int64_t> open_bytes;
  for (Response& r : responses) {
    const int64_t bytes = ResponseBytes(r);
    const bool fusable = r.type == ResponseType::kAllreduce && threshold_bytes > 0 &&
                         bytes < direct_bytes && bytes <= threshold_bytes && r.names.size() == 1;
    if (!fusable) {
      out.push_back(std::move(r));
      continue;
    }
    const Key key{static_cast<uint8_t>(r.dtype), static_cast<uint8_t>(r.reduce_op), r.prescale,
                  r.postscale, r.device};
    auto it = open.find(key);
    if (it != open.end() && open_bytes[key] + bytes <= threshold_bytes) {
      Response& group = out[it->second];
      group.names.push_back(std::move(r.names[0]));
      group.counts.push_back(r.counts[0]);
      open_bytes[key] += bytes;
      continue;
    }
    open[key] = out.size();
    open_bytes[key] = bytes;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace kolo
