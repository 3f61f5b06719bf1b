// This machine's host name (gethostname), "unknown" when it cannot be read: what logs print and
// what ranks compare to find the ones that share a node.
#ifndef KOLO_BASE_HOST_NAME_H_
#define KOLO_BASE_HOST_NAME_H_

#include <unistd.h>

#include <string>

namespace kolo {

// Inline: the MPI plugin (runtime/world/mpi_plugin.h) carries its own copy of the core but not
// base/logging.cc, whose state is libkolo.so's.
inline std::string HostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

}  // namespace kolo

#endif  // KOLO_BASE_HOST_NAME_H_
