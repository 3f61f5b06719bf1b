#include "fusion/planner.h"

#include <algorithm>

namespace kolo {

int64_t ResponseBytes(const Response& r) {
  int64_t n = 0;
  for (int64_t c : r.counts) n += c;
  return n * static_cast<int64_t>(DataTypeSize(r.dtype));
}

std::vector<Response> FuseResponses(std::vector<Response> responses, int64_t threshold_bytes,
                                    int64_t direct_bytes) {
  // The groups still accepting members: one per (dtype, op, scales, device) seen, so a handful;
  // a linear scan beats a map at this size (this runs for every tensor of every cycle).
  struct Open {
    uint8_t dtype, op;
    double prescale, postscale;
    int32_t device;
    size_t index;   // in `out`
    int64_t bytes;  // of tensor data in the group
  };
  std::vector<Response> out;
  out.reserve(responses.size());
  std::vector<Open> open;
  for (Response& r : responses) {
    const int64_t bytes = ResponseBytes(r);
    const bool fusable = r.type == ResponseType::kAllreduce && threshold_bytes > 0 &&
                         bytes < direct_bytes && bytes <= threshold_bytes && r.names.size() == 1;
    if (!fusable) {
      out.push_back(std::move(r));
      continue;
    }
    const uint8_t dtype = static_cast<uint8_t>(r.dtype), op = static_cast<uint8_t>(r.reduce_op);
    auto it = std::find_if(open.begin(), open.end(), [&](const Open& o) {
      return o.dtype == dtype && o.op == op && o.prescale == r.prescale &&
             o.postscale == r.postscale && o.device == r.device;
    });
    if (it != open.end() && it->bytes + bytes <= threshold_bytes) {
      Response& group = out[it->index];
      group.names.push_back(std::move(r.names[0]));
      group.counts.push_back(r.counts[0]);
      it->bytes += bytes;
      continue;
    }
    if (it == open.end()) it = open.insert(open.end(), Open{dtype, op, r.prescale, r.postscale, r.device, 0, 0});
    it->index = out.size();
    it->bytes = bytes;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace kolo
