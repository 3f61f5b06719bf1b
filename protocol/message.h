// What ranks tell the coordinator (Request) and what the coordinator tells every rank to do
// (Response), as plain values. runtime/wire/ turns them into FlatBuffers bytes and back.
#ifndef KOLO_PROTOCOL_MESSAGE_H_
#define KOLO_PROTOCOL_MESSAGE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"

namespace kolo {

enum class OpType : uint8_t {
  kAllreduce = 0,
  kAllgather = 1,
  kBroadcast = 2,
  kReducescatter = 3,
  kAlltoall = 4,
  kBarrier = 5,
  kJoin = 6,  // this rank ran out of data (Runtime::Join)
};
constexpr int kMaxOpType = 6;
std::string_view OpTypeName(OpType op);  // "allreduce", ...
// How every error and warning names an operation on a tensor: "allreduce 'grad/fc1'".
std::string OpLabel(OpType op, std::string_view name);

// One rank's readiness of one named tensor, with everything the other ranks must agree on.
struct Request {
  // The fields the response cache reads for every submission of every cycle come first, so
  // that they share a cache line (ResponseCache::Find, Cacheable); the rest follow.
  // This rank's id for `name` (TensorQueue::Add interns it), so that the background thread's
  // per-tensor work indexes arrays instead of hashing names. Local to the rank: never on the
  // wire, not a parameter (-1 = none: a refused Request, or one decoded from a peer).
  int32_t id = -1;
  // Which interning of `id` this is: the queue reuses the ids of names it dropped, but never an
  // (id, id_serial) pair, so a pair seen before names the same tensor without comparing names
  // (the response cache's lookup by id). Local, like `id`.
  uint32_t id_serial = 0;
  OpType op = OpType::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kSum;  // allreduce, reducescatter
  int32_t root = 0;                     // broadcast only
  int32_t device = -1;                  // -1 = host memory
  int32_t group_size = 0;               // see `group`
  double prescale = 1.0;                // allreduce, reducescatter
  double postscale = 1.0;               // allreduce, reducescatter
  std::vector<int64_t> shape;
  // Non-empty: this rank refused the submission locally (its caller got this error at once);
  // the Request still goes to the coordinator so the other ranks get an error, not a hang.
  std::string refused;
  std::vector<int64_t> splits;  // alltoall: rows sent to each rank (size entries)
  // A grouped operation (kolo_grouped_*): every member carries the group's key (its first
  // member's name) and `group_size`; the group is negotiated and executed all-or-nothing.
  std::string group;
  int32_t rank = 0;
  std::string name;
};

struct RequestList {
  std::vector<Request> requests;
  bool shutdown = false;  // this rank is shutting down
  // Every caller on this rank is blocked waiting for operations still in negotiation, named in
  // `waiting` (the deadlock check, runtime/negotiation/deadlock.h). Sent only while the ranks check.
  bool blocked = false;
  std::vector<std::string> waiting;
};

enum class ResponseType : uint8_t {
  kAllreduce = 0,
  kAllgather = 1,
  kBroadcast = 2,
  kError = 3,
  kReducescatter = 4,
  kAlltoall = 5,
  kBarrier = 6,
  kJoin = 7,  // every rank has joined; `root` is the rank that joined last
};
constexpr int kMaxResponseType = 7;

// Request.refused of a submission made on a rank that has joined, while the join is pending.
// The coordinator drops such a Request when it arrives after the join completed (nobody can be
// waiting for it then); before that, the name fails on every rank that submitted it.
inline constexpr char kRefusedJoined[] =
    "it has joined, and no operation can be submitted until every rank has joined";

// An operation every rank executes, in the order of the ResponseList. An allreduce Response
// may name several tensors: they are fused. While some ranks have joined, an allreduce Response
// may name tensors a joined rank never submitted: that rank takes part with the reduction's
// identity (runtime.cc). An error Response completes its tensors' handles
// with `error` on every rank.
struct Response {
  ResponseType type = ResponseType::kAllreduce;
  std::vector<std::string> names;
  StatusCode error_code = StatusCode::kOk;
  std::string error;
  DataType dtype = DataType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kSum;
  int32_t root = 0;
  double prescale = 1.0;
  double postscale = 1.0;
  int32_t device = -1;
  std::vector<int64_t> counts;      // allreduce: elements per name, same order as names
  std::vector<int64_t> first_dims;  // allgather: first dimension of each rank's input
  // alltoall: every rank's splits, size x size row-major (row q: rows q sends to each rank).
  std::vector<int64_t> splits;
  // This rank's Request ids of the tensors, in order (Request::id), for Responses served from
  // the response cache; else empty, and execution looks names up. A Response with ids may
  // leave `names` empty (fused cache hits: the controller copies no name unless asked,
  // Controller::set_name_hits), so the tensor count is NumTensors(). Local to the rank: never
  // on the wire.
  std::vector<int32_t> ids;

  size_t NumTensors() const { return ids.empty() ? names.size() : ids.size(); }
};

struct ResponseList {
  std::vector<Response> responses;
  bool shutdown = false;
  int32_t shutdown_rank = -1;  // the first rank that asked to shut down
  std::string fatal_error;     // non-empty: the coordinator failed; every rank stops with it
  // Autotune (runtime/negotiation/autotune.h): a new setting every rank applies from this cycle on; -1 = none.
  int64_t tuned_fusion_threshold_bytes = -1;
  double tuned_cycle_time_ms = -1;
};

}  // namespace kolo

#endif  // KOLO_PROTOCOL_MESSAGE_H_
