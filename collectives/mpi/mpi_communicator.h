// Communicator over an MPI communicator that kolo owns (a dup, with MPI_ERRORS_RETURN).
// Large calls are cut into pieces of at most `max_call_bytes`: MPI's int counts cap a call at
// 2^31-1 elements, and Open MPI's all-reduce allocates a message-sized temporary per call,
// which on fresh memory costs ~4 ms/MiB (docs/machine-notes.md 1-2); 4-16 MiB pieces avoid both.
#ifndef KOLO_COLLECTIVES_MPI_MPI_COMMUNICATOR_H_
#define KOLO_COLLECTIVES_MPI_MPI_COMMUNICATOR_H_

#include <mpi.h>

#include <functional>
#include <string>

#include "collectives/communicator.h"

namespace kolo {

class MpiCommunicator : public Communicator {
 public:
  // Takes ownership of `comm` (freed in the destructor unless MPI is finalised by then).
  MpiCommunicator(MPI_Comm comm, size_t max_call_bytes);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int Rank() const override { return rank_; }
  int Size() const override { return size_; }
  std::string_view BackendName() const override { return "mpi"; }
  bool HasNativeCollectives() const override { return true; }
  MPI_Comm comm() const { return comm_; }

  // MPI_Irecv/MPI_Isend (pieces of at most INT_MAX bytes); Wait tests in a loop that spins
  // briefly, then yields the core (ranks may outnumber cores), and runs the liveness check
  // once a second after the first second (collectives/mpi/mpi_p2p.cc).
  StatusOr<std::unique_ptr<P2PBatch>> Start(const std::vector<P2POp>& ops) override;
  // POSIX shared memory created by rank 0 and opened by the others, unlinked once all have
  // mapped it, so nothing is left in /dev/shm even if a process dies (mpi_shared.cc).
  StatusOr<std::unique_ptr<SharedSegment>> AllocateShared(size_t bytes_per_rank) override;
  Status Allreduce(const void* send, void* recv, size_t count, DataType dtype,
                   ReduceOp op) override;
  Status Allgatherv(const void* send, size_t send_bytes, void* recv,
                    const std::vector<size_t>& recv_bytes) override;
  Status ReduceScatter(const void* send, void* recv, const std::vector<size_t>& counts,
                       DataType dtype, ReduceOp op) override;
  Status Alltoallv(const void* send, const std::vector<size_t>& send_bytes, void* recv,
                   const std::vector<size_t>& recv_bytes) override;
  Status Broadcast(void* buffer, size_t bytes, int root) override;
  Status Barrier() override;
  // The data-plane collectives above, on a communicator that spans nodes, are MPI's
  // non-blocking ones completed by WaitAll, which polls as MPI's blocking calls do but can end
  // the wait (Collective in the .cc). Inside one node they are MPI's blocking calls: Open MPI's
  // non-blocking all-reduce (coll/libnbc) ran 5-35% slower than its blocking one (coll/tuned)
  // from 256 KiB to 4 MiB at 2 ranks here, and a peer on the same node that dies is seen by the
  // launcher.
  Status GatherBytes(const std::string& mine, std::vector<std::string>* all, int root) override;
  // The control-plane calls are non-blocking collectives completed by WaitPolled, which
  // sleeps between tests instead of spinning (see there).
  Status BroadcastBytes(std::string* bytes, int root) override;
  Status AndBits(uint64_t* words, size_t count) override;
  Status GatherWords(const uint64_t* mine, size_t count, uint64_t* all, int root) override;

  // Called about once a second while a control-plane wait has lasted over a second; an error
  // ends the wait with it (runtime/peer_watch.h: a peer process that is gone).
  void set_liveness_check(std::function<Status()> check) { liveness_check_ = std::move(check); }
  const std::function<Status()>& liveness_check() const { return liveness_check_; }
  Status CheckLiveness() override { return liveness_check_ ? liveness_check_() : Status::OK(); }

  // Tests `requests` in a loop until all complete: spins briefly, then yields the core; once a
  // second after the first, the liveness check, then the progress check with `waiting_for()`
  // ("rank 1 (receive, tag 7)"), either of which ends the wait with its error. The
  // point-to-point batches' Wait and the data-plane collectives across nodes.
  Status WaitAll(int n, MPI_Request* requests,
                 const std::function<std::string()>& waiting_for) const;

 private:
  Status WaitPolled(MPI_Request* request);
  template <typename BlockingCall, typename StartCall>
  Status Collective(const char* blocking_name, BlockingCall blocking, const char* start_name,
                    StartCall start) const;
  // "world ranks 2,3": the other ranks of this communicator, for the progress check's report.
  std::string PeersText() const;

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  size_t max_call_bytes_;
  bool spans_nodes_ = false;  // ranks on more than one node (MPI_COMM_TYPE_SHARED)
  std::function<Status()> liveness_check_;
};

// MPI datatype and op for a kolo dtype/op. float16/bfloat16 use kolo's own committed types and
// user-defined ops (reduced through float32 per step); 8/16-bit integer Sum and Product use
// kolo's user-defined ops too (Open MPI's AVX ones saturate instead of wrapping); bool uses
// MPI_UINT8_T with MPI_LOR/LAND.
// Must be called after MPI_Init, from the thread that owns MPI.
Status MpiTypeFor(DataType dtype, MPI_Datatype* out);
Status MpiOpFor(DataType dtype, ReduceOp op, MPI_Op* out);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_MPI_MPI_COMMUNICATOR_H_
