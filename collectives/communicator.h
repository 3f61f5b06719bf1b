// The transport interface every collective algorithm and the negotiation run over. A backend
// (MPI, the in-process loopback of the thread world, later NCCL/UCX) implements the primitives
// it has; the rest answer kUnimplemented "<backend> has no native X", so the Selector can move
// on. Sizes are in bytes or elements as named, 64-bit: implementations split calls whose
// counts exceed their library's int limits.
//
// Threading: a Communicator is used by one thread at a time (kolo's background thread).
#ifndef KOLO_COLLECTIVES_COMMUNICATOR_H_
#define KOLO_COLLECTIVES_COMMUNICATOR_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"

namespace kolo {

struct NodeContext;  // collectives/node_context.h

// One transfer of a point-to-point batch (Communicator::Start).
struct P2POp {
  enum class Kind : uint8_t { kSend, kRecv };
  Kind kind = Kind::kSend;
  void* buffer = nullptr;  // read for a send, written for a receive
  size_t bytes = 0;        // 0: nothing moves (both sides know the size)
  int peer = 0;
  int tag = 0;

  static P2POp Send(const void* buffer, size_t bytes, int peer, int tag) {
    return {Kind::kSend, const_cast<void*>(buffer), bytes, peer, tag};
  }
  static P2POp Recv(void* buffer, size_t bytes, int peer, int tag) {
    return {Kind::kRecv, buffer, bytes, peer, tag};
  }
};

// Transfers in flight (Communicator::Start). Their buffers must not be touched (sends) or read
// (receives) until Wait returns. A batch destroyed without Wait waits in its destructor and
// drops the status, so buffers are never freed under a transfer.
class P2PBatch {
 public:
  virtual ~P2PBatch() = default;
  // Completes every transfer of the batch; an error names the first failed one. Polls the
  // backend's liveness check, so a dead peer ends the wait with kUnavailable, not a hang.
  virtual Status Wait() = 0;
};

// Memory that every rank of a one-node communicator can load and store directly
// (Communicator::AllocateShared). Regions are 64-byte aligned and zero-filled when allocated.
// Synchronisation is the user's: std::atomic objects placed in a region work across processes
// (they are lock-free and address-free for 4- and 8-byte types on the platforms kolo builds for).
class SharedSegment {
 public:
  virtual ~SharedSegment() = default;
  // Rank r's region (r a rank of the communicator that allocated the segment).
  virtual void* Region(int rank) = 0;
  virtual size_t RegionBytes() const = 0;
};

class Communicator {
 public:
  Communicator() = default;
  virtual ~Communicator() = default;
  // One object per communicator: a copy would share its serial().
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int Rank() const = 0;
  virtual int Size() const = 0;
  // "mpi", "loopback": for logs, errors and algorithm names.
  virtual std::string_view BackendName() const = 0;
  // Whether the collectives below (Allreduce ... Alltoallv) are the library's own; without
  // them, "auto" in the collective tables means kolo's algorithms over point-to-point.
  virtual bool HasNativeCollectives() const { return false; }

  // Sends send_bytes to `dst` and receives recv_bytes from `src` with `tag`, concurrently. The
  // default is one batch of Start, waited for.
  virtual Status SendRecv(const void* send, size_t send_bytes, int dst, void* recv,
                          size_t recv_bytes, int src, int tag);
  // Starts the transfers without waiting, for algorithms that overlap a reduction with the
  // next transfer. The transport posts them in the order it runs fastest (MPI: sends first,
  // mpi_p2p.cc), so no caller may depend on it. Messages between one pair of ranks with one
  // tag arrive in the order they were started.
  virtual StatusOr<std::unique_ptr<P2PBatch>> Start(const std::vector<P2POp>& ops);

  // Collective over this communicator, whose ranks must share one host: a segment with a
  // region of `bytes_per_rank` bytes per rank. kUnimplemented where the backend or the host
  // cannot (the reason is in the message); the shared-memory algorithms then do not run.
  virtual StatusOr<std::unique_ptr<SharedSegment>> AllocateShared(size_t bytes_per_rank);

  // The library's own all-reduce of `count` elements; send == recv means in place. `op` is
  // kSum, kMin, kMax or kProduct (Average is Sum plus a division done by the caller).
  virtual Status Allreduce(const void* send, void* recv, size_t count, DataType dtype,
                           ReduceOp op);
  // Rank r contributes recv_bytes[r] bytes (send_bytes == recv_bytes[Rank()]); recv receives
  // all contributions concatenated in rank order.
  virtual Status Allgatherv(const void* send, size_t send_bytes, void* recv,
                            const std::vector<size_t>& recv_bytes);
  // Reduce-scatter: every rank contributes sum(counts) elements; rank r receives in `recv` the
  // reduction of elements [sum(counts[0..r)), +counts[r]) of every rank. `op` as Allreduce;
  // send and recv do not overlap.
  virtual Status ReduceScatter(const void* send, void* recv, const std::vector<size_t>& counts,
                               DataType dtype, ReduceOp op);
  // All-to-all, in bytes: this rank sends send_bytes[q] bytes (consecutive blocks of `send`, in
  // rank order) to rank q, and receives recv_bytes[q] bytes from rank q into consecutive blocks
  // of `recv`, in rank order. send and recv do not overlap.
  virtual Status Alltoallv(const void* send, const std::vector<size_t>& send_bytes, void* recv,
                           const std::vector<size_t>& recv_bytes);
  // `root`'s buffer of `bytes` bytes is copied to every rank's buffer.
  virtual Status Broadcast(void* buffer, size_t bytes, int root);
  virtual Status Barrier();

  // Control plane of the negotiation: variable-size byte strings.
  // On `root`, *all receives every rank's string in rank order; elsewhere it is untouched.
  virtual Status GatherBytes(const std::string& mine, std::vector<std::string>* all, int root);
  // `root`'s *bytes replaces every other rank's *bytes.
  virtual Status BroadcastBytes(std::string* bytes, int root);
  // Bitwise AND of `count` 64-bit words over all ranks, in place (the response cache's
  // readiness bits, runtime/negotiation/controller.cc).
  virtual Status AndBits(uint64_t* words, size_t count);
  // Every rank's `count` words to `root`: on `root`, `all` (count * Size() words) receives
  // them in rank order; elsewhere `all` is unused (may be null). The default goes through
  // GatherBytes; a backend with a fixed-size gather does it in one call.
  virtual Status GatherWords(const uint64_t* mine, size_t count, uint64_t* all, int root);

  // OK, or why a peer this communicator waits on can no longer answer (MPI: the runtime's
  // peer watch, runtime/peer_watch.h). Long waits outside the backend's own calls (the
  // shared-memory barriers) call it about once a second. Cheap; never blocks.
  virtual Status CheckLiveness() { return Status::OK(); }

  // Whether a wait of the data plane that has lasted since `since` for `waiting_for` ("rank 1
  // (receive, tag 7)") may go on: OK, or the error that ends it. A frozen peer (stopped, in a
  // debugger) is alive but never answers; the runtime installs a check that warns after the
  // stall check time and fails the wait after the stall shutdown time. Long waits of kolo's own
  // algorithms call it with CheckLiveness, about once a second. Without a check: OK.
  using ProgressCheck = std::function<Status(std::chrono::steady_clock::time_point since,
                                             const std::string& waiting_for)>;
  void set_progress_check(ProgressCheck check) { progress_check_ = std::move(check); }
  Status CheckProgress(std::chrono::steady_clock::time_point since,
                       const std::string& waiting_for) const {
    return progress_check_ ? progress_check_(since, waiting_for) : Status::OK();
  }

  // How this communicator's ranks group into nodes, with the node-local and cross-node
  // sub-communicators (collectives/node_context.h); nullptr when nobody set it up, and then
  // only flat algorithms run. Set once, before the first collective.
  NodeContext* node() const { return node_.get(); }
  // Also makes the node's sub-communicators part of this one's work order (order_serial).
  void set_node(std::shared_ptr<NodeContext> node);

  // A number no other Communicator of this process has had: what is kept per communicator
  // elsewhere (its NCCL communicators) is keyed by it, since a freed one's address may be
  // reused by the next.
  uint64_t serial() const { return serial_; }
  // Whose work order this communicator's device work joins: its own serial, or for the
  // node-local and cross-node sub-communicators of node(), that of the communicator they
  // belong to. kolo keeps one stream per order and device (collectives/nccl/nccl_comm.h), so
  // the hierarchical steps of one process set stay in one order and two process sets never
  // share one.
  uint64_t order_serial() const { return order_serial_ != 0 ? order_serial_ : serial_; }

 protected:
  Status NoNative(std::string_view what) const;

 private:
  static uint64_t NextSerial();

  const uint64_t serial_ = NextSerial();
  uint64_t order_serial_ = 0;  // 0: serial_
  std::shared_ptr<NodeContext> node_;
  ProgressCheck progress_check_;
};

// The counter behind serial(). A library with its own copy of this code in the same process
// (libkolo_mpi.so: runtime/world/mpi_plugin.h) draws from the counter of the one that loaded it,
// so that serials stay unique across both: SetCommunicatorSerialSource(that counter).
uint64_t NextCommunicatorSerial();
void SetCommunicatorSerialSource(uint64_t (*source)());

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_COMMUNICATOR_H_
