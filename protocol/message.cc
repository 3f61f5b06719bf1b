#include "protocol/message.h"

namespace kolo {

std::string_view OpTypeName(OpType op) {
  switch (op) {
    case OpType::kAllreduce: return "allreduce";
    case OpType::kAllgather: return "allgather";
    case OpType::kBroadcast: return "broadcast";
    case OpType::kReducescatter: return "reducescatter";
    case OpType::kAlltoall: return "alltoall";
    case OpType::kBarrier: return "barrier";
    case OpType::kJoin: return "join";
  }
  return "invalid-op";
}

std::string OpLabel(OpType op, std::string_view name) {
  std::string label(OpTypeName(op));
  label += " '";
  label += name;
  label += "'";
  return label;
}

}  // namespace kolo
