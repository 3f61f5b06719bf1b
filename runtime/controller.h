// One negotiation round over the control communicator (Horovod's controller protocol):
// every rank sends the Requests it queued since the last round to the coordinator (rank 0);
// the coordinator records them, turns the names that every rank has now submitted into
// validated Responses, fuses compatible all-reduces and broadcasts the ordered ResponseList,
// which every rank then executes in that order.
#ifndef KOLO_RUNTIME_CONTROLLER_H_
#define KOLO_RUNTIME_CONTROLLER_H_

#include <cstdint>

#include "collectives/communicator.h"
#include "runtime/coordinator.h"
#include "runtime/message.h"

namespace kolo {

class Controller {
 public:
  Controller(Communicator& control, int64_t fusion_threshold_bytes, int64_t direct_bytes);

  // Collective over the control communicator. An error means the control plane itself failed
  // (a transport error); a malformed message from a peer becomes fatal_error in the result.
  StatusOr<ResponseList> Negotiate(const RequestList& mine);

 private:
  static constexpr int kCoordinator = 0;
  ResponseList Coordinate(const std::vector<std::string>& gathered);

  Communicator& control_;
  int64_t fusion_threshold_bytes_;
  int64_t direct_bytes_;
  Coordinator coordinator_;
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_CONTROLLER_H_
