#include "fusion/planner.h"

#include <algorithm>

namespace kolo {

int64_t ResponseBytes(const Response& r) {
  int64_t n = 0;
  for (int64_t c : r.counts) n += c;
  return n * static_cast<int64_t>(DataTypeSize(r.dtype));
}

FusionKey FusionKey::Of(const Response& r) {
  FusionKey k;
  k.type = r.type;
  k.dtype = r.dtype;
  k.reduce_op = r.reduce_op;
  k.single = r.names.size() == 1 && r.counts.size() == 1;
  k.device = r.device;
  k.prescale = r.prescale;
  k.postscale = r.postscale;
  k.count = r.counts.empty() ? 0 : r.counts[0];
  k.bytes = ResponseBytes(r);
  k.tag = static_cast<uint64_t>(k.type) | static_cast<uint64_t>(k.dtype) << 8 |
          static_cast<uint64_t>(k.reduce_op) << 16 | static_cast<uint64_t>(k.single) << 24 |
          static_cast<uint64_t>(static_cast<uint32_t>(k.device)) << 32;
  return k;
}

Response* ResponseFuser::GroupFor(const FusionKey& k, bool hit, bool* opened) {
  ++added_;
  *opened = false;
  const bool fusable = k.type == ResponseType::kAllreduce && threshold_bytes_ > 0 &&
                       k.bytes < DirectBytes(k) && k.bytes <= threshold_bytes_ && k.single;
  if (!fusable) return nullptr;
  const uint8_t dtype = static_cast<uint8_t>(k.dtype), op = static_cast<uint8_t>(k.reduce_op);
  auto alike = [&](const Open& o) {
    return o.hits == hit && o.dtype == dtype && o.op == op && o.prescale == k.prescale &&
           o.postscale == k.postscale && o.device == k.device;
  };
  auto it = last_open_ < open_.size() && alike(open_[last_open_])
                ? open_.begin() + static_cast<std::ptrdiff_t>(last_open_)
                : std::find_if(open_.begin(), open_.end(), alike);
  const bool found = it != open_.end();
  if (!found) {
    it = open_.insert(open_.end(), Open{hit, dtype, op, k.prescale, k.postscale, k.device, 0, 0});
  }
  last_open_ = static_cast<size_t>(it - open_.begin());
  if (found && it->bytes + k.bytes <= threshold_bytes_) {
    it->bytes += k.bytes;
    return &out_[it->index];
  }
  it->index = out_.size();
  it->bytes = k.bytes;
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
  if (!group.names.empty()) group.names.reserve(rest);
  group.counts.reserve(rest);
  if (!group.ids.empty()) group.ids.reserve(rest);
}

void ResponseFuser::Add(Response&& r) {
  bool opened;
  Response* group = GroupFor(FusionKey::Of(r), false, &opened);
  if (!group) {
    out_.push_back(std::move(r));
    if (opened) Opened();
    return;
  }
  AddId(group, r.ids.size() == 1 ? r.ids[0] : -1);
  group->names.push_back(std::move(r.names[0]));
  group->counts.push_back(r.counts[0]);
}

void ResponseFuser::Add(const Response& r, int32_t id) {
  bool opened;
  Response* group = GroupFor(FusionKey::Of(r), false, &opened);
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

void ResponseFuser::AddHit(const Response& r, const FusionKey& key, int32_t id,
                           const std::string* name) {
  AddHitTo(r, key, id, name);
}

Response* ResponseFuser::AddHitTo(const Response& r, const FusionKey& key, int32_t id,
                                  const std::string* name) {
  bool opened;
  Response* group = GroupFor(key, true, &opened);
  if (!group && !opened) {
    // Not fusable: the whole Response, as cached (its name is one short copy).
    out_.push_back(r);
    Response& added = out_.back();
    added.ids.clear();
    if (id >= 0) added.ids.push_back(id);
    return nullptr;
  }
  if (!group) {
    // The first member of a new group: built from the key, so a group of ids copies no name.
    out_.emplace_back();
    Response& first = out_.back();
    first.type = key.type;
    first.dtype = key.dtype;
    first.reduce_op = key.reduce_op;
    first.device = key.device;
    first.prescale = key.prescale;
    first.postscale = key.postscale;
    first.counts.push_back(key.count);
    if (id >= 0) first.ids.push_back(id);
    if (name) first.names.push_back(*name);
    Opened();
    return &out_.back();
  }
  if (id >= 0 && group->ids.size() == group->counts.size()) {
    group->ids.push_back(id);
  } else {
    group->ids.clear();
  }
  if (name) group->names.push_back(*name);
  group->counts.push_back(key.count);
  return group;
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
