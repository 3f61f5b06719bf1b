// The cores this machine has online: what waits compare with the ranks that share the machine
// to decide whether spinning holds a core a peer needs (collectives/host/shm_node.cc,
// collectives/ucx/ucx_p2p.cc).
#ifndef KOLO_BASE_ONLINE_CORES_H_
#define KOLO_BASE_ONLINE_CORES_H_

#include <unistd.h>

#include <algorithm>

namespace kolo {

// Read once: sysconf(_SC_NPROCESSORS_ONLN) reads a sysfs file, ~6 us, as much as a small call.
inline int OnlineCores() {
  static const int cores = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  return cores;
}

}  // namespace kolo

#endif  // KOLO_BASE_ONLINE_CORES_H_
