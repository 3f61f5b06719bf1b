// What the negotiation tests hand a Coordinator: one rank's Requests as the RequestList its
// negotiation message carries.
#ifndef KOLO_TESTS_HARNESS_REQUESTS_H_
#define KOLO_TESTS_HARNESS_REQUESTS_H_

#include <utility>
#include <vector>

#include "protocol/message.h"

namespace kolo {
namespace testing {

inline RequestList RequestListOf(std::vector<Request> requests) {
  RequestList l;
  l.requests = std::move(requests);
  return l;
}

}  // namespace testing
}  // namespace kolo

#endif  // KOLO_TESTS_HARNESS_REQUESTS_H_
