// FlatBuffers encoding of RequestList / ResponseList. Decoding verifies the buffer and checks
// every enum value, so malformed bytes give kDataLoss, never undefined behaviour.
#ifndef KOLO_RUNTIME_WIRE_WIRE_H_
#define KOLO_RUNTIME_WIRE_WIRE_H_

#include <string>

#include "protocol/message.h"

namespace kolo {

std::string EncodeRequestList(const RequestList& list);
StatusOr<RequestList> DecodeRequestList(const std::string& bytes);
std::string EncodeResponseList(const ResponseList& list);
StatusOr<ResponseList> DecodeResponseList(const std::string& bytes);

}  // namespace kolo

#endif  // KOLO_RUNTIME_WIRE_WIRE_H_
