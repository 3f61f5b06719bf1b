// This machine's host name (gethostname), "unknown" when it cannot be read: what logs print and
// what ranks compare to find the ones that share a node.
#ifndef KOLO_BASE_HOST_NAME_H_
#define KOLO_BASE_HOST_NAME_H_

#include <string>

namespace kolo {

std::string HostName();

}  // namespace kolo

#endif  // KOLO_BASE_HOST_NAME_H_
