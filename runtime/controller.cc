#include "runtime/controller.h"

#include "fusion/planner.h"
#include "runtime/wire/wire.h"

namespace kolo {

Controller::Controller(Communicator& control, int64_t fusion_threshold_bytes,
                       int64_t direct_bytes)
    : control_(control),
      fusion_threshold_bytes_(fusion_threshold_bytes),
      direct_bytes_(direct_bytes),
      coordinator_(control.Size()) {}

ResponseList Controller::Coordinate(const std::vector<std::string>& gathered) {
  ResponseList out;
  for (size_t r = 0; r < gathered.size(); ++r) {
    auto list = DecodeRequestList(gathered[r]);
    if (!list.ok()) {
      out.shutdown = true;
      out.fatal_error = "coordinator: message from rank " + std::to_string(r) +
                        " rejected: " + list.status().message();
      return out;
    }
    coordinator_.Add(*list, static_cast<int>(r));
  }
  out.responses =
      FuseResponses(coordinator_.TakeReady(), fusion_threshold_bytes_, direct_bytes_);
  if (coordinator_.shutdown_requested()) {
    out.shutdown = true;
    out.shutdown_rank = coordinator_.shutdown_rank();
  }
  return out;
}

StatusOr<ResponseList> Controller::Negotiate(const RequestList& mine) {
  std::vector<std::string> gathered;
  KOLO_RETURN_IF_ERROR(control_.GatherBytes(EncodeRequestList(mine), &gathered, kCoordinator)
                           .AddContext("negotiation: gathering requests"));
  std::string bytes;
  ResponseList result;
  if (control_.Rank() == kCoordinator) {
    result = Coordinate(gathered);
    bytes = EncodeResponseList(result);
  }
  KOLO_RETURN_IF_ERROR(control_.BroadcastBytes(&bytes, kCoordinator)
                           .AddContext("negotiation: broadcasting responses"));
  if (control_.Rank() == kCoordinator) return result;
  auto decoded = DecodeResponseList(bytes);
  if (!decoded.ok()) {
    return Status(decoded.status()).AddContext("negotiation: response from the coordinator");
  }
  return decoded;
}

}  // namespace kolo
