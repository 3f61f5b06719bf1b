#include "runtime/coordinator.h"

#include <sstream>

namespace kolo {

Coordinator::Coordinator(int size) : size_(size) {}

void Coordinator::Add(const RequestList& list, int from_rank) {
  if (list.shutdown && shutdown_rank_ < 0) shutdown_rank_ = from_rank;
  for (const Request& req : list.requests) {
    Entry& e = table_[req.name];
    if (e.by_rank.empty()) {
      e.by_rank.resize(size_);
      e.submitted.assign(size_, false);
    }
    const int r = from_rank;
    if (e.submitted[r]) {
      // The enqueue check makes this impossible for a correct peer; report it, don't crash.
      e.duplicate_error = std::string(OpTypeName(req.op)) + " '" + req.name +
                          "': submitted twice by rank " + std::to_string(r) +
                          " before it completed";
      continue;
    }
    e.by_rank[r] = req;
    e.by_rank[r].rank = r;
    e.submitted[r] = true;
    if (++e.count == size_) ready_.push_back(req.name);
  }
}

std::vector<Response> Coordinator::TakeReady() {
  std::vector<Response> out;
  out.reserve(ready_.size());
  while (!ready_.empty()) {
    auto it = table_.find(ready_.front());
    ready_.pop_front();
    if (it == table_.end()) continue;
    if (!it->second.duplicate_error.empty()) {
      Response err;
      err.type = ResponseType::kError;
      err.names = {it->first};
      err.error_code = StatusCode::kInvalidArgument;
      err.error = it->second.duplicate_error;
      out.push_back(std::move(err));
    } else {
      out.push_back(BuildResponse(it->second.by_rank));
    }
    table_.erase(it);
  }
  return out;
}

namespace {

std::string Scale(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

// "allreduce 'grad/fc1': shape mismatch: rank 0 has [3,4], rank 1 has [4,3]"
std::string Mismatch(const Request& first, const char* what, int rank_a, const std::string& a,
                     int rank_b, const std::string& b) {
  return std::string(OpTypeName(first.op)) + " '" + first.name + "': " + what +
         " mismatch: rank " + std::to_string(rank_a) + " has " + a + ", rank " +
         std::to_string(rank_b) + " has " + b;
}

std::string TrailingDims(const std::vector<int64_t>& shape) {
  std::string s = "[*";
  for (size_t i = 1; i < shape.size(); ++i) s += "," + std::to_string(shape[i]);
  return s + "]";
}

// The first disagreement between rank 0's request and rank r's, or "".
std::string Compare(const Request& a, const Request& b) {
  const int ra = a.rank, rb = b.rank;
  if (a.op != b.op) {
    return Mismatch(a, "operation", ra, std::string(OpTypeName(a.op)), rb,
                    std::string(OpTypeName(b.op)));
  }
  if (a.dtype != b.dtype) {
    return Mismatch(a, "dtype", ra, std::string(DataTypeName(a.dtype)), rb,
                    std::string(DataTypeName(b.dtype)));
  }
  if (a.device != b.device) {
    auto dev = [](int d) { return d < 0 ? std::string("cpu") : "cuda:" + std::to_string(d); };
    return Mismatch(a, "device", ra, dev(a.device), rb, dev(b.device));
  }
  if (a.op == OpType::kAllgather) {
    bool same = a.shape.size() == b.shape.size();
    for (size_t i = 1; same && i < a.shape.size(); ++i) same = a.shape[i] == b.shape[i];
    if (!same) {
      return Mismatch(a, "shape (all but the first dimension)", ra, ShapeString(a.shape), rb,
                      ShapeString(b.shape)) +
             " (expected " + TrailingDims(a.shape) + " on every rank)";
    }
  } else if (a.shape != b.shape) {
    return Mismatch(a, "shape", ra, ShapeString(a.shape), rb, ShapeString(b.shape));
  }
  if (a.op == OpType::kAllreduce) {
    if (a.reduce_op != b.reduce_op) {
      return Mismatch(a, "reduce op", ra, std::string(ReduceOpName(a.reduce_op)), rb,
                      std::string(ReduceOpName(b.reduce_op)));
    }
    if (a.prescale != b.prescale) {
      return Mismatch(a, "prescale factor", ra, Scale(a.prescale), rb, Scale(b.prescale));
    }
    if (a.postscale != b.postscale) {
      return Mismatch(a, "postscale factor", ra, Scale(a.postscale), rb, Scale(b.postscale));
    }
  }
  if (a.op == OpType::kBroadcast && a.root != b.root) {
    return Mismatch(a, "root rank", ra, std::to_string(a.root), rb, std::to_string(b.root));
  }
  return "";
}

}  // namespace

Response BuildResponse(const std::vector<Request>& by_rank) {
  const Request& first = by_rank.front();
  Response resp;
  resp.names = {first.name};
  for (const Request& req : by_rank) {
    if (req.refused.empty()) continue;
    resp.type = ResponseType::kError;
    resp.error_code = StatusCode::kInvalidArgument;
    resp.error = std::string(OpTypeName(req.op)) + " '" + req.name + "': rank " +
                 std::to_string(req.rank) + " refused it: " + req.refused;
    return resp;
  }
  for (size_t r = 1; r < by_rank.size(); ++r) {
    std::string why = Compare(first, by_rank[r]);
    if (!why.empty()) {
      resp.type = ResponseType::kError;
      resp.error_code = StatusCode::kInvalidArgument;
      resp.error = std::move(why);
      return resp;
    }
  }
  resp.dtype = first.dtype;
  resp.device = first.device;
  switch (first.op) {
    case OpType::kAllreduce:
      resp.type = ResponseType::kAllreduce;
      resp.reduce_op = first.reduce_op;
      resp.prescale = first.prescale;
      resp.postscale = first.postscale;
      resp.counts = {NumElements(first.shape)};
      break;
    case OpType::kAllgather:
      resp.type = ResponseType::kAllgather;
      for (const Request& r : by_rank) resp.first_dims.push_back(r.shape.empty() ? 0 : r.shape[0]);
      break;
    case OpType::kBroadcast:
      resp.type = ResponseType::kBroadcast;
      resp.root = first.root;
      break;
  }
  return resp;
}

}  // namespace kolo
