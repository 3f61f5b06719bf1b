// Noticing that a peer process is gone, so no survivor hangs silently.
//
// Under mpirun, a rank that is killed, crashes or exits without MPI_Finalize makes the launcher
// tear the job down: every other process gets SIGTERM, then SIGKILL a second later
// (odls_base_sigkill_timeout). Two things make that readable:
//  - Termination notice: kolo installs a SIGTERM handler (only where the application left the
//    default) that writes, before the process dies, "kolo: rank 0/3 (pid 123 on host) terminated
//    by SIGTERM; gone on this host: rank 1 (pid 124)" — the survivors name the lost rank before
//    mpirun's own report. Then the default action runs (exit status 143).
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

// OK, or kUnavailable naming the first peer of this node whose process is gone.
Status CheckPeers();

// True when `pid` no longer runs (does not exist, or is a zombie). Async-signal-safe.
bool ProcessGone(int pid);

// This node's peers that are stopped (SIGSTOP, a debugger): "rank 2 (pid 123, stopped by a
// signal)", comma-separated; "" when none. Alive to CheckPeers, they answer nothing: the
// progress watch names them.
std::string StoppedPeers();

}  // namespace kolo

#endif  // KOLO_RUNTIME_PEER_WATCH_H_
