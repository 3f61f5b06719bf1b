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

std::vector<Response> FuseResponses(std::vector<Response> responses, int64_t threshold_bytes,
                                    int64_t direct_bytes);

// Bytes of tensor data a (possibly fused) allreduce Response covers.
int64_t ResponseBytes(const Response& r);

}  // namespace kolo

#endif  // KOLO_FUSION_PLANNER_H_
