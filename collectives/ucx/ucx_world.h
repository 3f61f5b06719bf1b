// The process's UCX state under kolo's UCX communicators (ucx_communicator.h): one UCP context,
// one worker and one endpoint per rank of the world, shared by the world communicator and every
// sub-communicator made from it.
//
// Why one worker: a worker is UCX's unit of progress (its queues, its wire-up, its rendezvous
// protocols all move only inside ucp_worker_progress on the thread that owns it). kolo drives
// every communicator from its one background thread, so one worker in
// UCS_THREAD_MODE_SERIALIZED is enough: no locks inside UCX, and progressing it for one
// communicator's wait also moves the others' traffic (a rendezvous sender waits for its
// receiver's acknowledgement, which the receiver only sends while progressing). Serialized, not
// single: the application's thread creates the world (kolo_init) and destroys it
// (kolo_shutdown), the background thread uses it in between; no call may overlap another.
//
// Address exchange is out of band: the world is built from a function that all-gathers one
// byte string per rank (MPI today, a TCP rendezvous later), so nothing here depends on a
// launcher. Each rank contributes its host name and its worker address; the host names decide
// each endpoint's error-handling mode:
//  - same host: UCP_ERR_HANDLING_MODE_NONE. With PEER mode UCX 1.13 refuses the shared-memory
//    transports (endpoint creation fails, or falls back to TCP over loopback, ~20x slower), and
//    it never reports a SIGKILLed shared-memory peer anyway. A dead same-host peer is noticed
//    by the liveness check the owner installs (kolo's peer watch looks at the pid).
//  - other hosts: UCP_ERR_HANDLING_MODE_PEER. The endpoint's error callback records the
//    failure (measured over TCP: within 1 ms of the peer's death); waits poll it, since UCX
//    does not complete the receives posted to that peer, and cancel them.
//
// Configuration is read with the prefix "KOLO" (ucp_config_read), so KOLO_UCX_TLS etc. override
// UCX_TLS for kolo without touching other UCX users of the process. When neither is set, kolo
// chooses: on one host "posix,sysv,self" (shared memory only), across hosts "^cma" (everything
// but CMA). Why without CMA (cross-memory attach, process_vm_readv, UCX's zero-copy path between
// processes of one host): in UCX 1.13 a CMA copy from a peer that has died aborts the whole
// process (a fatal "process_vm_readv ... No such process" in cma_ep.c, whatever the endpoint's
// error mode), where kolo must report the dead rank instead; measured, 5 of 15 3-rank runs with
// one rank SIGKILLed aborted a survivor with CMA, 0 of 30 without. Why no TCP on one host: with
// CMA gone, UCX sends same-host rendezvous messages over TCP on loopback when TCP is enabled
// (ring all-reduce, 2 ranks: 32 KiB 6x, 2 MiB 2x slower than through the shared-memory FIFO).
// Across hosts TCP is needed, and same-host pairs there pay that price (set KOLO_UCX_TLS).
// Across hosts kolo also sends every message eagerly (RNDV_THRESH=inf) unless the user set the
// threshold: by rendezvous over TCP, two ranks exchanging large messages with each other (every
// step of recursive doubling and halving) took turns rather than sending both ways at once, as
// Open MPI's TCP transport does with its put protocol (collectives/mpi/tcp_defaults.h); over
// 1 Gbit/s namespace links, 2 nodes x 2 ranks, two runs each: Rabenseifner 12.0-12.9 ->
// 8.8-9.0 ms at 1 MiB and 61-62 -> 37-38 ms at 4 MiB, hierarchical 59 -> 36 ms at 4 MiB, the
// ring (no swaps) unchanged; none of UCX's rendezvous schemes (get_zcopy, put_zcopy, am)
// helped. The cost: a message that arrives before its receive is posted is held by UCX until
// it is, and on one host eager messages were slower from 4 MiB (Rabenseifner at 16 MiB 7.0-8.9
// against 6.4-6.6 ms), so one host keeps UCX's own threshold (collectives/ucx/ucx_defaults.h).
// The threshold is the context's, so in a job across hosts the pairs on one host send eagerly
// too (hierarchical's steps inside a node); measured with UCX 1.13. Like TLS, a value in UCX's
// configuration file ranks below kolo's choice: set KOLO_UCX_RNDV_THRESH to keep another.
//
// Device memory: Debian's UCX 1.13 has no CUDA support. MemoryTypes() tells what the context
// can move; kolo's host algorithms pass host buffers only, and every call declares
// UCS_MEMORY_TYPE_HOST so UCX skips its pointer-type detection.
#ifndef KOLO_COLLECTIVES_UCX_UCX_WORLD_H_
#define KOLO_COLLECTIVES_UCX_UCX_WORLD_H_

#include <ucp/api/ucp.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace kolo {

// All-gathers one byte string per rank: *all receives every rank's string in rank order.
// Called kExchanges times, collectively by every rank of the world, at its creation.
using UcxAllgather = std::function<Status(const std::string& mine, std::vector<std::string>* all)>;

// "ucp_tag_send_nbx to rank 2 failed: Connection reset by remote peer".
Status UcxError(ucs_status_t status, const std::string& call, int peer = -1);

class UcxWorld {
 public:
  // Collective over the `size` ranks: creates the context and worker, exchanges the addresses
  // through `allgather` and connects to every rank (itself included).
  static StatusOr<std::shared_ptr<UcxWorld>> Create(int rank, int size, UcxAllgather allgather);
  // How many all-gathers Create makes (the hosts, then the worker addresses): what a rank that
  // is not part of the world but shares the channel must match.
  static constexpr int kExchanges = 2;
  // Closes the endpoints (flushing them unless the world is broken). The world communicator
  // meets the other ranks first (UcxCommunicator's destructor), so no rank tears down its worker
  // while a peer still sends to it.
  ~UcxWorld();
  UcxWorld(const UcxWorld&) = delete;
  UcxWorld& operator=(const UcxWorld&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  ucp_worker_h worker() const { return worker_; }
  ucp_ep_h endpoint(int world_rank) const { return peers_[world_rank].ep; }
  const std::string& host(int world_rank) const { return peers_[world_rank].host; }
  // Ranks of the world on this rank's host (this one included).
  int local_size() const { return local_size_; }
  // UCS_MEMORY_TYPE bits the context supports (ucp_context_query).
  uint64_t memory_types() const { return memory_types_; }

  // One ucp_worker_progress; true when it did something.
  bool Progress() { return ucp_worker_progress(worker_) != 0; }
  // Progresses until nothing more is ready (acknowledgements owed to peers go out).
  void Drain() {
    while (Progress()) {
    }
  }

  // OK, or the error UCX reported on the endpoint to `world_rank` (PEER mode only).
  Status PeerStatus(int world_rank) const;
  // After an error the world is not used for traffic again: the destructor then closes the
  // endpoints by force and skips the final barrier (a dead rank would never join it).
  void MarkBroken() { broken_ = true; }
  bool broken() const { return broken_; }

  // Communicator ids (15 bits of the UCP tag): the lowest id free in every rank of a group is
  // agreed on with an AndBits over FreeIds() (ucx_communicator.cc), then taken.
  static constexpr int kMaxCommIds = 1 << 15;
  std::vector<uint64_t> FreeIds() const;
  void TakeId(int id);
  void ReleaseId(int id);

 private:
  struct Peer {
    ucp_ep_h ep = nullptr;
    std::string host;
    ucs_status_t error = UCS_OK;  // set by the endpoint's error callback
    UcxWorld* world = nullptr;    // the error callback's argument
    int rank = 0;
  };
  static void OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);

  UcxWorld(int rank, int size, UcxAllgather allgather);
  Status Init();
  // The context (with the transports for `one_host` or not) and the worker; *address gets this
  // rank's host name and worker address, packed.
  Status OpenWorker(bool one_host, std::string* address);
  void CloseEndpoints();

  const int rank_;
  const int size_;
  UcxAllgather allgather_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  uint64_t memory_types_ = 0;
  std::vector<Peer> peers_;
  std::vector<uint64_t> used_ids_;  // bitmap over kMaxCommIds
  int local_size_ = 1;
  bool broken_ = false;
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_UCX_UCX_WORLD_H_
