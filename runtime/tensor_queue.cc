#include "runtime/tensor_queue.h"

namespace kolo {

Status TensorQueue::Add(TensorEntry entry) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return FailedPreconditionError(closed_reason_);
  const std::string& name = entry.request.name;
  if (table_.count(name)) {
    return InvalidArgumentError(std::string(OpTypeName(entry.request.op)) + " '" + name +
                                "': a tensor with this name is already in flight on rank " +
                                std::to_string(entry.request.rank) +
                                "; wait for it before reusing the name");
  }
  new_requests_.push_back(entry.request);
  table_.emplace(name, std::move(entry));
  return Status::OK();
}

Status TensorQueue::AddGroup(std::vector<TensorEntry> entries) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return FailedPreconditionError(closed_reason_);
  for (size_t i = 0; i < entries.size(); ++i) {
    const Request& r = entries[i].request;
    bool repeated = false;
    for (size_t j = 0; j < i; ++j) repeated = repeated || entries[j].request.name == r.name;
    if (table_.count(r.name) || repeated) {
      return InvalidArgumentError(std::string(OpTypeName(r.op)) + " '" + r.name + "': " +
                                  (repeated ? "named twice in one group"
                                            : "a tensor with this name is already in flight on "
                                              "rank " + std::to_string(r.rank)) +
                                  "; the group was not submitted");
    }
  }
  for (TensorEntry& e : entries) {
    new_requests_.push_back(e.request);
    std::string name = e.request.name;
    table_.emplace(std::move(name), std::move(e));
  }
  return Status::OK();
}

void TensorQueue::AddRefused(Request request) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!closed_) new_requests_.push_back(std::move(request));
}

std::vector<Request> TensorQueue::TakeNewRequests() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Request> out;
  out.swap(new_requests_);
  return out;
}

bool TensorQueue::HasNewRequests() {
  std::lock_guard<std::mutex> lock(mu_);
  return !new_requests_.empty();
}

TensorEntry TensorQueue::Take(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = table_.find(name);
  if (it == table_.end()) return TensorEntry{};
  TensorEntry e = std::move(it->second);
  it->second.handle = nullptr;  // the reservation
  return e;
}

void TensorQueue::Release(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  table_.erase(name);
}

std::vector<TensorEntry> TensorQueue::Close(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  closed_reason_ = reason;
  std::vector<TensorEntry> out;
  out.reserve(table_.size());
  for (auto& kv : table_) {
    if (kv.second.handle) out.push_back(std::move(kv.second));
  }
  table_.clear();
  new_requests_.clear();
  return out;
}

}  // namespace kolo
