#include "runtime/message.h"

namespace kolo {

std::string_view OpTypeName(OpType op) {
  switch (op) {
    case OpType::kAllreduce: return "allreduce";
    case OpType::kAllgather: return "allgather";
    case OpType::kBroadcast: return "broadcast";
  }
  return "invalid-op";
}

}  // namespace kolo
