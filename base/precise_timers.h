// Short sleeps that end when asked: the background thread's waits on its peers (the
// negotiation's polls, collectives/mpi/mpi_communicator.cc WaitPolled; the shared-memory
// barriers, collectives/host/shm_node.cc; the cycle's catch-up) sleep 1-200 us at a time, and
// Linux lets a thread's timed sleep end up to its timer slack late: 50 us by default, as long
// as those sleeps or longer. A step that waits on a peer then notices the peer's arrival that
// much later, and the peer waits for it in the next step (docs/benchmarks.md, "Oversleeping in
// the negotiation"). The slack belongs to the calling thread (prctl PR_SET_TIMERSLACK) and to
// the threads it starts afterwards, which inherit it: for the background thread, the finaliser
// of device operations (runtime/finaliser.h), whose 50 us polls of the GPU then wake every
// ~50 us rather than every ~100. The application's threads keep theirs. The runtime asks for it
// only where its node's ranks do not outnumber the cores (runtime/runtime.cc).
#ifndef KOLO_BASE_PRECISE_TIMERS_H_
#define KOLO_BASE_PRECISE_TIMERS_H_

#if defined(__linux__)
#include <sys/prctl.h>
#endif

namespace kolo {

// Sets the calling thread's timer slack to 1 us (Linux; elsewhere nothing). Returns whether it
// did.
inline bool UsePreciseTimersOnThisThread() {
#if defined(__linux__)
  return prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL) == 0;
#else
  return false;
#endif
}

}  // namespace kolo

#endif  // KOLO_BASE_PRECISE_TIMERS_H_
