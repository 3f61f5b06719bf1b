#include "fusion/planner.h"

#include <algorithm>

namespace kolo {

int64_t ResponseBytes(const Response& r) {
  int64_t n = 0;
  for (int64_t c : r.counts) n += c;
  return n * static_cast<int64_t>(DataTypeSize(r.dtype));
}

Response* ResponseFuser::GroupFor(const Response& r, int64_t bytes, bool* opened) {
  ++added_;
  *opened = false;
  const bool fusable = r.type == ResponseType::kAllreduce && threshold_bytes_ > 0 &&
                       bytes < direct_bytes_ && bytes <= threshold_bytes_ && r.names.size() == 1;
  if (!fusable) return nullptr;
  const uint8_t dtype = static_cast<uint8_t>(r.dtype), op = static_cast<uint8_t>(r.reduce_op);
  auto alike = [&](const Open& o) {
    return o.dtype == dtype && o.op == op && o.prescale == r.prescale &&
           o.postscale == r.postscale && o.device == r.device;
  };
  auto it = last_open_ < open_.size() && alike(open_[last_open_])
                ? open_.begin() + static_cast<std::ptrdiff_t>(last_open_)
                : std::find_if(open_.begin(), open_.end(), alike);
  const bool found = it != open_.end();
  if (!found) {
    it = open_.insert(open_.end(), Open{dtype, op, r.prescale, r.postscale, r.device, 0, 0});
  }
  last_open_ = static_cast<size_t>(it - open_.begin());
  if (found && it->bytes + bytes <= threshold_bytes_) {
    it->bytes += bytes;
    return &out_[it->index];
  }
  it->index = out_.size();
  it->bytes = bytes;
  *opened = true;
  return nullptr;
}

void ResponseFuser::Opened() {
  // Room for the members still to come (those the threshold lets in, were they all as big as
  // the first), so that a group of hundreds does not grow one doubling at a time.
  if (expected_ <= added_) return;
  Response& group = out_.back();
  const int64_t first = std::max<int64_t>(ResponseBytes(group), 1);
  const size_t rest = std::min<size_t>(expected_ - added_, threshold_bytes_ / first) + 1;
  group.names.reserve(rest);
  group.counts.reserve(rest);
  if (!group.ids.empty()) group.ids.reserve(rest);
}

void ResponseFuser::Add(Response&& r) {
  bool opened;
  Response* group = GroupFor(r, ResponseBytes(r), &opened);
  if (!group) {
    out_.push_back(std::move(r));
    if (opened) Opened();
    return;
  }
  AddId(group, r.ids.size() == 1 ? r.ids[0] : -1);
  group->names.push_back(std::move(r.names[0]));
  group->counts.push_back(r.counts[0]);
}

void ResponseFuser::Add(const Response& r, int32_t id, int64_t bytes) {
  bool opened;
  Response* group = GroupFor(r, bytes, &opened);
  if (!group) {
    out_.push_back(r);
    Response& added = out_.back();
    added.ids.clear();
    if (id >= 0 && added.names.size() == 1) added.ids.push_back(id);
    if (opened) Opened();
    return;
  }
  AddId(group, id);
  group->names.push_back(r.names[0]);
  group->counts.push_back(r.counts[0]);
}

void ResponseFuser::AddId(Response* group, int32_t id) {
  // Called before the member's name is added: ids are complete iff as many as the names.
  if (id >= 0 && group->ids.size() == group->names.size()) {
    group->ids.push_back(id);
  } else {
    group->ids.clear();
  }
}

std::vector<Response> ResponseFuser::Take() {
  std::vector<Response> out;
  out.swap(out_);
  open_.clear();
  last_open_ = 0;
  return out;
}

std::vector<Response> FuseResponses(std::vector<Response> responses, int64_t threshold_bytes,
                                    int64_t direct_bytes) {
  ResponseFuser fuser(threshold_bytes, direct_bytes, responses.size());
  for (Response& r : responses) fuser.Add(std::move(r));
  return fuser.Take();
}

}  // namespace kolo
