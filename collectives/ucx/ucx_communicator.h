// Communicator over UCX's tag-matching API (UCP): every host algorithm of the registry and the
// negotiation's control plane run over it unchanged, as they do over MPI and the loopback.
//
// Why the tag API and not active messages: kolo's algorithms are written against posted
// receives into known buffers ("receive recv_bytes from rank src with tag t into here"), which
// is what tag matching does in the library, zero-copy for large messages (rendezvous straight
// into the posted buffer) and with per-sender, per-tag ordering built in. Active messages would
// make kolo rebuild matching, unexpected-message queues and the rendezvous around them.
//
// The 64-bit UCP tag, matched with a full mask so nothing is matched by accident:
//   bit 63      control: 1 for the communicator's own control-plane traffic (GatherBytes,
//               Barrier, ...), 0 for the algorithms' point-to-point, so neither can steal the
//               other's messages whatever tags the algorithms use
//   bits 62-48  communicator id (15 bits), the same on every member: sub-communicators share
//               the worker, and a message belongs to exactly one of them
//   bits 47-32  the sender's rank in the communicator (16 bits: at most 65536 ranks)
//   bits 31-0   the caller's tag
// UCP matches posted receives in posting order against messages from one sender in sending
// order, which is Communicator::Start's ordering promise for one pair and tag.
//
// Waiting: UCX moves nothing unless the worker is progressed on its thread. A wait polls
// ucp_worker_progress, spinning for its first 64 polls (2 where the host's ranks outnumber its
// cores) and then yielding the core (sched_yield) after every poll that made no progress:
// measured with 4 ranks on 2 cores, one 8-byte ring step took 2.7 ms busy-polling, 7 us
// yielding, 58 us armed with ucp_worker_wait; with 2 ranks, yielding from the first idle poll
// on made an 8-byte exchange 0.3-0.5 us slower than over MPI, spinning first 1.3-1.6x faster
// than MPI (kolo-bench --transport ucx, docs/benchmarks.md). About once a second a wait runs the
// liveness check and CheckProgress, so a dead or frozen peer ends it with an error naming the rank
// ("rank 1 (receive, tag 7)"), never a hang; on error the outstanding receives are cancelled
// (ucp_request_cancel) and every request released. After its requests complete, a wait
// drains the worker once more: a rendezvous sender completes only when its receiver, having
// received, sends the acknowledgement, and that needs the receiver's progress.
//
// Measured on one host while waits still yielded from the first idle poll (2 cores, UCX
// 1.13.1 over shared memory, SendRecv around a ring, mean of 20000 / 300 calls): 2 ranks, 8 B
// 0.86-0.89 us (MpiCommunicator 1.03-1.05 us), 1 MiB 119-130 us (MPI 105-117 us); 4 ranks on
// the 2 cores, 8 B 4.3-5.3 us (MPI 3.5-4.6 us).
//
// Control plane (ucx_control.cc): GatherBytes is one message from each rank to the root, of a
// length the root learns by probing; BroadcastBytes and Broadcast are binomial trees from the
// root; AndBits is recursive doubling; Barrier is a dissemination barrier of empty messages.
// Each is the textbook algorithm over this communicator's point-to-point; UCX has no
// collectives.
//
// Memory: host buffers only. Every call declares UCS_MEMORY_TYPE_HOST (no pointer-type
// detection per call); Debian's UCX 1.13 cannot move CUDA memory at all, and kolo's host
// algorithms never give a communicator device buffers (ucx_world.h).
#ifndef KOLO_COLLECTIVES_UCX_UCX_COMMUNICATOR_H_
#define KOLO_COLLECTIVES_UCX_UCX_COMMUNICATOR_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/ucx/ucx_world.h"

namespace kolo {

class UcxCommunicator : public Communicator {
 public:
  // The world communicator: collective over `size` ranks, addresses exchanged by `allgather`
  // (ucx_world.h), which must stay callable until the last communicator of the world is gone.
  static StatusOr<std::unique_ptr<UcxCommunicator>> Create(int rank, int size,
                                                           UcxAllgather allgather);
  ~UcxCommunicator() override;
  UcxCommunicator(const UcxCommunicator&) = delete;
  UcxCommunicator& operator=(const UcxCommunicator&) = delete;

  // A communicator of the ranks `members` (distinct ranks of this one; its rank i is members[i])
  // on the same worker, like MPI_Comm_create: collective over this communicator, every rank
  // passing the same list.
  // The id is agreed with an AndBits of every rank's free ids, so it is unique on every member
  // whatever other sub-communicators each has. Non-members get nullptr.
  StatusOr<std::unique_ptr<UcxCommunicator>> CreateSub(const std::vector<int>& members);

  int Rank() const override { return rank_; }
  int Size() const override { return static_cast<int>(world_ranks_.size()); }
  std::string_view BackendName() const override { return "ucx"; }
  UcxWorld& world() const { return *world_; }

  // ucp_tag_recv_nbx for every receive, then ucp_tag_send_nbx for every send, one request each
  // (UCX takes 64-bit sizes); empty transfers are skipped, as both sides know the sizes.
  // A receive that gets a size other than its own fails the wait (ucx_p2p.cc).
  StatusOr<std::unique_ptr<P2PBatch>> Start(const std::vector<P2POp>& ops) override;
  Status Broadcast(void* buffer, size_t bytes, int root) override;
  Status Barrier() override;
  Status GatherBytes(const std::string& mine, std::vector<std::string>* all, int root) override;
  Status BroadcastBytes(std::string* bytes, int root) override;
  Status AndBits(uint64_t* words, size_t count) override;

  // Called about once a second by every wait that lasts; an error ends the wait with it (kolo's
  // peer watch, runtime/peer_watch.h, for the same-host peers UCX does not report).
  void set_liveness_check(std::function<Status()> check) { liveness_check_ = std::move(check); }
  Status CheckLiveness() override;

  // One pass of the worker's progress, for an idle owner that wants pending acknowledgements
  // to go out between collectives.
  void Progress() { world_->Drain(); }

  // The transfers of one wait (ucx_p2p.cc), control traffic included.
  struct Op {
    P2POp::Kind kind = P2POp::Kind::kSend;
    void* buffer = nullptr;
    size_t bytes = 0;
    int peer = 0;
    int tag = 0;
    bool control = false;
    // A receive whose length only the sender knows: *sized takes the message's length and its
    // bytes (buffer and bytes unused). One message instead of a length and then the bytes.
    std::string* sized = nullptr;
  };
  // Posts `ops` (receives first; empty ones too: control messages may be empty) and returns the
  // batch; Wait completes it. Used by Start and by the control plane.
  StatusOr<std::unique_ptr<P2PBatch>> Post(const std::vector<Op>& ops);
  Status Run(const std::vector<Op>& ops);

 private:
  UcxCommunicator(std::shared_ptr<UcxWorld> world, int id, std::vector<int> world_ranks);
  friend class UcxBatch;
  uint64_t Tag(int sender, int tag, bool control) const;

  std::shared_ptr<UcxWorld> world_;
  int id_ = 0;
  std::vector<int> world_ranks_;  // this communicator's rank r is world rank world_ranks_[r]
  int rank_ = 0;
  std::function<Status()> liveness_check_;
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_UCX_UCX_COMMUNICATOR_H_
