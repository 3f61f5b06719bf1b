// Groups compatible all-reduce Responses into fused ones, at the coordinator, so every rank
// executes the same groups. Compatible = same dtype, reduce op, scale factors and device.
//
// Rules (MACHINE-NOTES.md 5: one big packed buffer loses to per-tensor calls here, because
// packing costs ~30% and big buffers fall out of cache):
//  - a group holds at most `threshold_bytes` of tensor data (KOLO_FUSION_THRESHOLD); 0 = no
//    fusion;
//  - a tensor of at least `direct_bytes` (KOLO_FUSION_DIRECT_BYTES, default 64 KiB) is not
//    fused: packing and unpacking it would cost more (2 copies at ~15 GB/s) than the latency of
//    a call of its own (a few us), so it is reduced straight from its buffers; it is never held
//    back either;
//  - groups keep the order of their first member; other Responses keep their places.
#ifndef KOLO_FUSION_PLANNER_H_
#define KOLO_FUSION_PLANNER_H_

#include <cstdint>
#include <vector>

#include "runtime/message.h"

namespace kolo {

// Bytes of tensor data a (possibly fused) allreduce Response covers.
int64_t ResponseBytes(const Response& r);

std::vector<Response> FuseResponses(std::vector<Response> responses, int64_t threshold_bytes,
                                    int64_t direct_bytes);

// The same rules, one Response at a time: FuseResponses(rs) == Add each of rs in order, Take.
// The controller adds its cached Responses by reference, so a cache hit that joins a group
// costs a name and a count, not a copy of the whole Response (this runs for every tensor of
// every cycle).
class ResponseFuser {
 public:
  // `expected`: how many Responses will be added (a hint: a new group reserves room for the
  // rest, so that it does not grow one name at a time).
  ResponseFuser(int64_t threshold_bytes, int64_t direct_bytes, size_t expected = 0)
      : threshold_bytes_(threshold_bytes), direct_bytes_(direct_bytes), expected_(expected) {}
  void Add(Response&& r);
  // `id`: this rank's Request::id of r's one name (or -1). A group keeps its members' ids
  // (Response::ids) while every member has one.
  void Add(const Response& r, int32_t id = -1) { Add(r, id, ResponseBytes(r)); }
  // The same with ResponseBytes(r) known (the response cache keeps it per slot).
  void Add(const Response& r, int32_t id, int64_t bytes);
  std::vector<Response> Take();

 private:
  // The groups still accepting members: one per (dtype, op, scales, device) seen, so a handful;
  // a linear scan beats a map at this size.
  struct Open {
    uint8_t dtype, op;
    double prescale, postscale;
    int32_t device;
    size_t index;   // in `out_`
    int64_t bytes;  // of tensor data in the group
  };
  // The group `r` (of `bytes`) joins, its bytes counted, or nullptr when `r` goes into out_ as
  // a Response of its own: not fusable, or the first member of a new group (then registered as
  // open and *opened set).
  Response* GroupFor(const Response& r, int64_t bytes, bool* opened);
  // Called with the first member of a new group, just put in out_.
  void Opened();
  // Adds a joining member's id to the group's, or drops the group's when either is missing.
  static void AddId(Response* group, int32_t id);

  int64_t threshold_bytes_;
  int64_t direct_bytes_;
  size_t expected_;
  size_t added_ = 0;
  std::vector<Response> out_;
  std::vector<Open> open_;
  size_t last_open_ = 0;  // in open_: the group joined last, tried first (runs of alike tensors)
};

}  // namespace kolo

#endif  // KOLO_FUSION_PLANNER_H_
