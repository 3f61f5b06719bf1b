// Groups compatible all-reduce Responses into fused ones, at the coordinator, so every rank
// executes the same groups. Compatible = same dtype, reduce op, scale factors and device.
//
// Rules (docs/machine-notes.md 5: one big packed buffer loses to per-tensor calls here, because
// packing costs ~30% and big buffers fall out of cache):
//  - a group holds at most `threshold_bytes` of tensor data (KOLO_FUSION_THRESHOLD); 0 = no
//    fusion;
//  - a tensor of at least `direct_bytes` (KOLO_FUSION_DIRECT_BYTES, 64 KiB by default) is not
//    fused: packing and unpacking it would cost more (2 copies at ~15 GB/s) than the latency of
//    a call of its own (a few us), so it is reduced straight from its buffers; it is never held
//    back either. Host tensors may have a direct size of their own (set_host_direct_bytes):
//    where the node's all-reduce takes a fused group in its tensors' own buffers (shm's
//    RunList) there is nothing to pack, and the runtime lets host tensors of any size fuse;
//  - groups keep the order of their first member; other Responses keep their places.
#ifndef KOLO_FUSION_PLANNER_H_
#define KOLO_FUSION_PLANNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/message.h"

namespace kolo {

// Bytes of tensor data a (possibly fused) allreduce Response covers.
int64_t ResponseBytes(const Response& r);

std::vector<Response> FuseResponses(std::vector<Response> responses, int64_t threshold_bytes,
                                    int64_t direct_bytes);

// What fusing a single-tensor Response needs, kept flat per slot by the response cache so that a
// hit is fused without reading its Response (names, counts: each behind a pointer).
struct FusionKey {
  // type, dtype, reduce_op, single and device in one word: two keys with equal tags and scale
  // factors fuse alike (compared once per hit in AddHits' runs).
  uint64_t tag = 0;
  ResponseType type = ResponseType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kSum;
  bool single = false;  // names one tensor
  int32_t device = -1;
  double prescale = 1.0, postscale = 1.0;
  int64_t count = 0;  // elements (counts[0])
  int64_t bytes = 0;  // ResponseBytes
  static FusionKey Of(const Response& r);
};

// The same rules, one Response at a time: FuseResponses(rs) == Add each of rs in order, Take.
// The controller adds cache hits with AddHit: a hit that joins a group costs an id and a count,
// not a copy of its Response or name (this runs for every tensor of every cycle). Hits fuse
// only with hits, and Responses from the coordinator only with each other, so that whether a
// rank asked for names (a timeline on rank 0 only) cannot change the groups.
class ResponseFuser {
 public:
  // `expected`: how many Responses will be added (a hint: a new group reserves room for the
  // rest, so that it does not grow one name at a time).
  ResponseFuser(int64_t threshold_bytes, int64_t direct_bytes, size_t expected = 0)
      : threshold_bytes_(threshold_bytes),
        direct_bytes_(direct_bytes),
        host_direct_bytes_(direct_bytes),
        expected_(expected) {}
  // The direct size for host tensors alone (device tensors and Adasum keep direct_bytes): where
  // the host's all-reduce takes a fused response's tensors in their own buffers (RunsLists, shm
  // on one node), fusing a large tensor costs no copy, and the runtime lets every size fuse.
  void set_host_direct_bytes(int64_t bytes) { host_direct_bytes_ = bytes; }
  void Add(Response&& r);
  // `id`: this rank's Request::id of r's one name (or -1). A group keeps its members' ids
  // (Response::ids) while every member has one.
  void Add(const Response& r, int32_t id = -1);
  // A cache hit: `r` is the cached single-tensor Response, `key` FusionKey::Of(r), `id` this
  // rank's Request::id of it (or -1). A hit fused into a group adds its name only when `name`
  // is given; a group whose members all have ids then names its tensors by ids only. The
  // caller gives names to every hit of a Take, or to none; to every one when one lacks an id.
  void AddHit(const Response& r, const FusionKey& key, int32_t id, const std::string* name);
  // AddHit for each of `slots` in order, with key keys[slot], id ids[slot], Response
  // response_of(slot) and (with_names) name name_of(slot): a run of hits that join the same
  // group costs a comparison of two keys and two push_backs each.
  template <typename ResponseOf, typename NameOf>
  void AddHits(const std::vector<int>& slots, const FusionKey* keys, const int32_t* ids,
               bool with_names, ResponseOf response_of, NameOf name_of);
  std::vector<Response> Take();

 private:
  // The groups still accepting members: one per (dtype, op, scales, device) seen, so a handful;
  // a linear scan beats a map at this size.
  struct Open {
    bool hits;  // a group of cache hits (AddHit)
    uint8_t dtype, op;
    double prescale, postscale;
    int32_t device;
    size_t index;   // in `out_`
    int64_t bytes;  // of tensor data in the group
  };
  // The group `r` (of `bytes`) joins, its bytes counted, or nullptr when `r` goes into out_ as
  // a Response of its own: not fusable, or the first member of a new group (then registered as
  // open and *opened set).
  Response* GroupFor(const FusionKey& key, bool hit, bool* opened);
  // Called with the first member of a new group, just put in out_.
  void Opened();
  // AddHit, returning the group the hit opened or joined (open_[last_open_]), or nullptr.
  Response* AddHitTo(const Response& r, const FusionKey& key, int32_t id, const std::string* name);
  // Adds a joining member's id to the group's, or drops the group's when either is missing.
  static void AddId(Response* group, int32_t id);

  // Adasum keeps direct_bytes on the host too: RunAdasum packs its groups whole.
  int64_t DirectBytes(const FusionKey& k) const {
    return k.device < 0 && k.reduce_op != ReduceOp::kAdasum ? host_direct_bytes_ : direct_bytes_;
  }

  int64_t threshold_bytes_;
  int64_t direct_bytes_;       // device tensors
  int64_t host_direct_bytes_;  // host tensors
  size_t expected_;
  size_t added_ = 0;
  std::vector<Response> out_;
  std::vector<Open> open_;
  size_t last_open_ = 0;  // in open_: the group joined last, tried first (runs of alike tensors)
};

template <typename ResponseOf, typename NameOf>
void ResponseFuser::AddHits(const std::vector<int>& slots, const FusionKey* keys,
                            const int32_t* ids, bool with_names, ResponseOf response_of,
                            NameOf name_of) {
  const size_t n = slots.size();
  size_t i = 0;
  while (i < n) {
    const int first = slots[i++];
    const FusionKey& k = keys[first];
    Response* joined =
        AddHitTo(response_of(first), k, ids[first], with_names ? &name_of(first) : nullptr);
    if (!joined) continue;  // not fusable
    Open& o = open_[last_open_];  // the group k opened or joined
    Response& group = *joined;
    // The hits that follow and fuse alike with k join its group while it has room; the
    // first that does not goes through AddHit.
    while (i < n) {
      const int slot = slots[i];
      const FusionKey& next = keys[slot];
      if (next.tag != k.tag || next.prescale != k.prescale || next.postscale != k.postscale ||
          next.bytes >= DirectBytes(next) || next.bytes > threshold_bytes_ ||
          o.bytes + next.bytes > threshold_bytes_) {
        break;
      }
      ++added_;
      o.bytes += next.bytes;
      const int32_t id = ids[slot];
      if (id >= 0 && group.ids.size() == group.counts.size()) {
        group.ids.push_back(id);
      } else {
        group.ids.clear();
      }
      if (with_names) group.names.push_back(name_of(slot));
      group.counts.push_back(next.count);
      ++i;
    }
  }
}

}  // namespace kolo

#endif  // KOLO_FUSION_PLANNER_H_
