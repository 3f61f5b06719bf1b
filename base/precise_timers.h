// Short sleeps that end when asked: the background thread's waits on its peers (the
// negotiation's polls, collectives/mpi/mpi_communicator.cc WaitPolled; the shared-memory
// barriers, collectives/host/shm_node.cc; the cycle's catch-up) sleep 1-200 us at a time, and
// Linux lets a thread's timed sleep end up to its timer slack late: 50 us by default, as long as
// the sleep itself or longer. A step that waits on a peer then notices the peer's arrival that
// much later, and the peer waits for it in the next step (docs/benchmarks.md, "Oversleeping in
// the negotiation"). The slack is the calling thread's own (prctl PR_SET_TIMERSLACK), so this
// changes nothing for the application's threads.
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
