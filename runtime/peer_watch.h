// Noticing that a peer process is gone, so no survivor hangs silently.
//
// Under mpirun, a rank that is killed, crashes or exits without MPI_Finalize makes the launcher
// tear the job down: every other process gets SIGTERM, then SIGKILL a second later
// (odls_base_sigkill_timeout), or as soon as one of them dies (Open MPI's wait is a sleep()
// that SIGCHLD ends). Two things make that readable:
//  - Termination notice: kolo installs a SIGTERM handler (only where the application left the
//    default) that writes, before the process dies, "kolo: rank 0/3 (pid 123 on host) terminated
//    by SIGTERM; gone on this host: rank 1 (pid 124)" — the survivors name the lost rank before
//    mpirun's own report. Then it restores the default action and waits, at most a second, until
//    no other rank on this host still has its notice to write (still catches SIGTERM), so that
//    its death does not bring the launcher's SIGKILL to a rank whose handler has not run yet;
//    then the default action runs (exit status 143, or the launcher's SIGKILL ends the wait).
//  - Liveness while waiting: the control plane's waits (MpiCommunicator::WaitPolled) call
//    CheckPeers about once a second after the first second, which fails the wait with
//    kUnavailable "rank 1 (pid 124 on host) is gone" when a peer on this node no longer exists
//    (or is a zombie), so the runtime stops and every pending handle gets that error even when
//    nothing tears the job down.
// Only peers on the same node can be checked this way (their pids mean something here); a lost
// rank on another node is left to the launcher.
#ifndef KOLO_RUNTIME_PEER_WATCH_H_
#define KOLO_RUNTIME_PEER_WATCH_H_

#include <string>
#include <vector>

#include "base/status.h"

namespace kolo {

struct LocalPeer {
  int rank = 0;  // in kolo's base communicator (MPI_COMM_WORLD unless kolo_init_ranks/_comm)
  int pid = 0;
};

// Remembers this process's rank and its node's peers, and installs the SIGTERM notice (once;
// later calls update the table). `host` is this node's name as MPI reports it.
void WatchPeers(int rank, int size, const std::string& host, const std::vector<LocalPeer>& peers);

// OK, or kUnavailable naming every peer of this node whose process is gone: "rank 2 (pid 125
// on host) is gone: it exited or was killed without shutting kolo down"; with more than one,
// "rank 0 (pid 123 on host) is gone, rank 2 (pid 125 on host) is gone: they exited ...".
Status CheckPeers();

// True when `pid` no longer runs (does not exist, or is a zombie). Async-signal-safe.
bool ProcessGone(int pid);

// This node's peers that are stopped (SIGSTOP, a debugger): "rank 2 (pid 123, stopped by a
// signal)", comma-separated; "" when none. Alive to CheckPeers, they answer nothing: the
// progress watch names them.
std::string StoppedPeers();

}  // namespace kolo

#endif  // KOLO_RUNTIME_PEER_WATCH_H_
