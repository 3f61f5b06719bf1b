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
// Only kolo's threads are changed: the runtime starts its background thread, which makes the
// MPI calls of every operation, with SIGPIPE blocked from its first instruction (the threads it
// starts inherit that). The application's threads keep their disposition (Python ignores
// SIGPIPE already); MPI calls made on them (kolo_init's start of MPI, MPI_Finalize at exit) are
// not covered.
#ifndef KOLO_BASE_BROKEN_PIPE_H_
#define KOLO_BASE_BROKEN_PIPE_H_

#include <pthread.h>
#include <signal.h>

#include <thread>
#include <utility>

namespace kolo {

// Starts std::thread(f) with SIGPIPE blocked in the new thread from the start: a thread
// inherits its creator's signal mask, so the calling thread blocks SIGPIPE while it creates the
// thread and then restores its own mask.
template <typename F>
std::thread StartThreadBlockingBrokenPipe(F&& f) {
  sigset_t blocked, old;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &blocked, &old);
  struct Restore {
    sigset_t mask;
    ~Restore() { pthread_sigmask(SIG_SETMASK, &mask, nullptr); }
  } restore{old};
  return std::thread(std::forward<F>(f));
}

}  // namespace kolo

#endif  // KOLO_BASE_BROKEN_PIPE_H_
