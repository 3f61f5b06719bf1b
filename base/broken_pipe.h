// A connection a dead peer left behind must end in an error, not in the death of this process.
// Open MPI's TCP transport writes to its sockets with writev, which cannot pass MSG_NOSIGNAL:
// writing to a connection the peer's kernel has reset raises SIGPIPE in the writing thread,
// and SIGPIPE's default action ends the whole process at once, silently. When a rank on
// another node died mid all-reduce, a survivor sometimes wrote to it before the launcher tore
// the job down, and ended that way: no error, no notice, a "Broken pipe" in the launcher's
// report that named the survivor instead of the rank that died (tests/multinode/run_fault.py
// kill, two runs in 150). With SIGPIPE blocked in the thread that writes, writev fails with
// EPIPE instead, which Open MPI reports ("writev failed: Broken pipe") and survives: the rank
// goes on to kolo's error or to the launcher's teardown with kolo's notice, as every other
// survivor does. The signal stays pending in that thread, which never unblocks it. kolo's own
// sockets pass MSG_NOSIGNAL (runtime/world).
//
// Only kolo's threads are changed: the runtime's background thread, which makes the MPI calls
// of every operation, blocks it for itself and for the threads it starts (they inherit it).
// The application's threads keep their disposition (Python ignores SIGPIPE already).
#ifndef KOLO_BASE_BROKEN_PIPE_H_
#define KOLO_BASE_BROKEN_PIPE_H_

#include <pthread.h>
#include <signal.h>

namespace kolo {

// Blocks SIGPIPE in the calling thread. Returns whether it did.
inline bool BlockBrokenPipeOnThisThread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  return pthread_sigmask(SIG_BLOCK, &set, nullptr) == 0;
}

}  // namespace kolo

#endif  // KOLO_BASE_BROKEN_PIPE_H_
