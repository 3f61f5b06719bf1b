#include "runtime/tensor_queue.h"

#include <algorithm>

namespace kolo {

int32_t TensorQueue::Intern(const std::string& name) {
  auto [it, added] = ids_.try_emplace(name, 0);
  if (!added) return it->second;
  int32_t id;
  if (free_ids_.empty()) {
    id = static_cast<int32_t>(slots_.size());
    slots_.emplace_back();
  } else {
    id = free_ids_.back();
    free_ids_.pop_back();
  }
  it->second = id;
  // Never 0 (Request's default), and unique over the queue's life, even across Close (until
  // 2^32 internings wrap it; a clash then needs the same id to come back at that serial).
  if (++last_serial_ == 0) ++last_serial_;
  slots_[id].serial = last_serial_;
  return id;
}

void TensorQueue::Detach(int32_t id) {
  Slot& s = slots_[id];
  if (!s.pending) return;
  s.pending = false;
  loose_.push_back(s.entry.request);
  // The copy outlives the entry, and the id may later go to another name: the copy keeps no
  // id, so nothing (a cache hit served by id) can take that other name's entry for it.
  loose_.back().id = -1;
  loose_.back().id_serial = 0;
  for (size_t i = 0; i < new_requests_.size(); ++i) {
    if (new_requests_[i].id != id) continue;
    new_requests_[i] = NewRequest{&loose_.back(), -1};
    new_keys_[i].id = -1;
    new_keys_[i].id_serial = 0;
  }
}

void TensorQueue::AddNew(const Request* request, int32_t id) {
  new_requests_.push_back(NewRequest{request, id});
  new_keys_.push_back(RequestKey::Of(*request));
}

void TensorQueue::AddLoose(Request request) {
  loose_.push_back(std::move(request));
  AddNew(&loose_.back(), -1);
}

void TensorQueue::ReleaseId(int32_t id) {
  Slot& s = slots_[id];
  if (!s.in_flight) return;
  Detach(id);
  s.in_flight = false;
  s.taken = false;
  s.entry = TensorEntry{};
  --in_flight_;
  // Sweep when idle names are both many and the majority: each sweep then drops at least as
  // many names as it visits twice over, so its cost is spread over the releases that made them.
  const size_t idle = ids_.size() - in_flight_;
  if (idle <= kMaxIdleNames || idle <= in_flight_) return;
  for (auto it = ids_.begin(); it != ids_.end();) {
    if (slots_[it->second].in_flight) {
      ++it;
      continue;
    }
    free_ids_.push_back(it->second);
    it = ids_.erase(it);
  }
}

std::string TensorQueue::InFlightError(const Request& r) const {
  return OpLabel(r.op, r.name) + ": a tensor with this name is already in flight on rank " + std::to_string(r.rank);
}

Status TensorQueue::Add(TensorEntry entry) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return FailedPreconditionError(closed_reason_);
  const int32_t id = Intern(entry.request.name);
  Slot& s = slots_[id];
  if (s.in_flight) {
    return InvalidArgumentError(InFlightError(entry.request) +
                                "; wait for it before reusing the name");
  }
  entry.request.id = id;
  entry.request.id_serial = s.serial;
  s.in_flight = true;
  s.pending = true;
  s.entry = std::move(entry);
  AddNew(&s.entry.request, id);
  ++in_flight_;
  return Status::OK();
}

Status TensorQueue::AddGroup(std::vector<TensorEntry> entries) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return FailedPreconditionError(closed_reason_);
  for (size_t i = 0; i < entries.size(); ++i) {
    const Request& r = entries[i].request;
    bool repeated = false;
    for (size_t j = 0; j < i; ++j) repeated = repeated || entries[j].request.name == r.name;
    auto it = ids_.find(r.name);
    const bool in_flight = it != ids_.end() && slots_[it->second].in_flight;
    if (in_flight || repeated) {
      return InvalidArgumentError(
          (repeated ? OpLabel(r.op, r.name) + ": named twice in one group"
                    : InFlightError(r)) +
          "; the group was not submitted");
    }
  }
  for (TensorEntry& e : entries) {
    const int32_t id = Intern(e.request.name);
    e.request.id = id;
    Slot& s = slots_[id];
    e.request.id_serial = s.serial;
    s.in_flight = true;
    s.pending = true;
    s.entry = std::move(e);
    AddNew(&s.entry.request, id);
    ++in_flight_;
  }
  return Status::OK();
}

void TensorQueue::AddRefused(Request request) {
  std::lock_guard<std::mutex> lock(mu_);
  request.id = -1;
  if (!closed_) AddLoose(std::move(request));
}

void TensorQueue::TakeNewRequests(std::vector<const Request*>* out,
                                  std::vector<RequestKey>* keys) {
  out->clear();
  std::lock_guard<std::mutex> lock(mu_);
  // The caller is done with the loose Requests it was given last time.
  loose_.erase(loose_.begin(), loose_.begin() + static_cast<std::ptrdiff_t>(loose_handed_));
  loose_handed_ = loose_.size();
  out->reserve(new_requests_.size());
  for (const NewRequest& n : new_requests_) {
    if (n.id >= 0) {
      slots_[n.id].pending = false;
    } else if (!n.request->refused.empty() && n.request->refused != kRefusedJoined) {
      refusals_.insert(n.request->name);
    }
    out->push_back(n.request);
  }
  new_requests_.clear();
  if (keys) keys->swap(new_keys_);  // the caller's old array becomes the next one's storage
  new_keys_.clear();
}

bool TensorQueue::HasNewRequests() {
  std::lock_guard<std::mutex> lock(mu_);
  return !new_requests_.empty();
}

bool TensorQueue::NegotiatingNames(const std::vector<const Handle*>& handles,
                                   std::vector<std::string>* names) {
  names->clear();
  if (handles.empty()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  for (const Slot& slot : slots_) {
    if (!slot.in_flight || slot.taken || !slot.entry.handle) continue;
    if (std::find(handles.begin(), handles.end(), slot.entry.handle.get()) != handles.end()) {
      names->push_back(slot.entry.request.name);
    }
  }
  return names->size() == handles.size();
}

TensorEntry TensorQueue::Take(const std::string& name, bool error) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool answers_refusal = error && refusals_.erase(name) > 0;
  auto it = ids_.find(name);
  if (it == ids_.end()) return TensorEntry{};
  Slot& s = slots_[it->second];
  if (!s.in_flight || s.taken) return TensorEntry{};
  if (answers_refusal && s.pending) return TensorEntry{};  // submitted after the refusal
  Detach(it->second);
  s.taken = true;
  return std::move(s.entry);
}

TensorEntry TensorQueue::Take(int32_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (id < 0 || static_cast<size_t>(id) >= slots_.size()) return TensorEntry{};
  Slot& s = slots_[id];
  if (!s.in_flight || s.taken) return TensorEntry{};
  Detach(id);
  s.taken = true;
  return std::move(s.entry);
}

void TensorQueue::Release(const Request& request) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int32_t id = request.id;
    if (id >= 0 && static_cast<size_t>(id) < slots_.size() && slots_[id].taken) {
      // The id is the one Add gave this entry, and a name in flight keeps its id (a sweep
      // drops only names not in flight), so the slot is this entry's without a name check.
      ReleaseId(id);
      return;
    }
  }
  Release(request.name);
}

void TensorQueue::Release(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ids_.find(name);
  if (it != ids_.end()) ReleaseId(it->second);
}

std::vector<TensorEntry> TensorQueue::Close(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  closed_reason_ = reason;
  std::vector<TensorEntry> out;
  out.reserve(in_flight_);
  for (Slot& s : slots_) {
    if (s.in_flight && !s.taken && s.entry.handle) out.push_back(std::move(s.entry));
  }
  ids_.clear();
  slots_.clear();
  free_ids_.clear();
  in_flight_ = 0;
  new_requests_.clear();
  new_keys_.clear();
  loose_.clear();
  loose_handed_ = 0;
  refusals_.clear();
  return out;
}

}  // namespace kolo
