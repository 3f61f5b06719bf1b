// A Request's parameters packed flat (no pointers), for the response cache's comparison of a
// new submission with the one it cached, which runs for every tensor of every cycle. The queue
// makes the key when a tensor is submitted (on the submitting thread) and hands the keys to the
// background thread in one contiguous array, so a cycle of cache hits reads the keys in order
// instead of chasing a pointer into the queue's table (and from there into the shape) per
// tensor.
//
// A Request whose parameters do not fit (splits, a group, more than kInlineDims dimensions) has
// a key that is not `simple`: it still carries the id and the scalars, and a comparison falls
// back to SameParameters on the Requests themselves.
#ifndef KOLO_RUNTIME_NEGOTIATION_REQUEST_KEY_H_
#define KOLO_RUNTIME_NEGOTIATION_REQUEST_KEY_H_

#include <cstddef>
#include <cstdint>

#include "protocol/message.h"

namespace kolo {

// Only operations whose Response depends on nothing but the ranks' Requests are cached:
// allreduce, allgather, broadcast, reducescatter, alltoall; never a refused Request. Barriers
// have unique names and must include joined ranks; joins are never cached.
inline bool IsCacheable(const Request& r) {
  return r.refused.empty() && r.op != OpType::kBarrier && r.op != OpType::kJoin;
}

struct RequestKey {
  static constexpr size_t kInlineDims = 4;

  int32_t id = -1;          // Request::id
  uint32_t id_serial = 0;   // Request::id_serial
  OpType op = OpType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kSum;
  bool simple = false;      // no splits, no group, at most kInlineDims dimensions
  bool cacheable = false;   // IsCacheable
  uint8_t ndims = 0;        // when simple
  int32_t root = 0, device = -1, group_size = 0;
  double prescale = 1.0, postscale = 1.0;
  int64_t dims[kInlineDims] = {};

  static RequestKey Of(const Request& r) {
    RequestKey k;
    k.id = r.id;
    k.id_serial = r.id_serial;
    k.op = r.op;
    k.dtype = r.dtype;
    k.reduce_op = r.reduce_op;
    k.root = r.root;
    k.device = r.device;
    k.group_size = r.group_size;
    k.prescale = r.prescale;
    k.postscale = r.postscale;
    k.cacheable = IsCacheable(r);
    k.simple = r.splits.empty() && r.group.empty() && r.shape.size() <= kInlineDims;
    if (k.simple) {
      k.ndims = static_cast<uint8_t>(r.shape.size());
      for (size_t i = 0; i < r.shape.size(); ++i) k.dims[i] = r.shape[i];
    }
    return k;
  }

  // SameParameters of two simple keys' Requests (the id is not a parameter).
  bool SameSimpleParameters(const RequestKey& o) const {
    if (op != o.op || dtype != o.dtype || reduce_op != o.reduce_op || root != o.root ||
        device != o.device || group_size != o.group_size || prescale != o.prescale ||
        postscale != o.postscale || ndims != o.ndims) {
      return false;
    }
    for (size_t i = 0; i < ndims; ++i) {
      if (dims[i] != o.dims[i]) return false;
    }
    return true;
  }
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_NEGOTIATION_REQUEST_KEY_H_
