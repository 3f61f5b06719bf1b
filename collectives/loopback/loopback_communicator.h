// The thread world's transport: N ranks as threads of one process, exchanging data through
// shared memory. Collectives are rendezvous: every rank posts a pointer to its contribution,
// waits for all (a generation barrier), computes its own result from everyone's contributions
// in rank order, and waits again so contributions stay valid until all have read them.
// Every wait has a deadline, so a missing rank fails the test with
// "loopback rank 2/3 still blocked in Allreduce after 10 s" instead of hanging it.
#ifndef KOLO_COLLECTIVES_LOOPBACK_LOOPBACK_COMMUNICATOR_H_
#define KOLO_COLLECTIVES_LOOPBACK_LOOPBACK_COMMUNICATOR_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "collectives/communicator.h"
#include "collectives/node_context.h"

namespace kolo {

class LoopbackWorld {
 public:
  LoopbackWorld(int size, std::chrono::milliseconds deadline);
  int size() const { return size_; }

  // Rendezvous of all ranks: posts `mine`, runs consume(all posts) once all have posted, then
  // waits until every rank has consumed. `what` names the call in deadline errors.
  Status Exchange(int rank, const void* mine,
                  const std::function<void(const std::vector<const void*>&)>& consume,
                  const char* what);
  // Fails every pending and later wait with `why` (a test's escape hatch).
  void Abort(const std::string& why);

  void Post(int src, int dst, int tag, std::string payload);
  Status Take(int src, int dst, int tag, std::string* payload, int rank);

 private:
  Status Arrive(int rank, const char* what);

  const int size_;
  const std::chrono::milliseconds deadline_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::vector<const void*> posts_;
  std::string abort_reason_;
  std::map<std::tuple<int, int, int>, std::deque<std::string>> mail_;
};

class LoopbackCommunicator : public Communicator {
 public:
  LoopbackCommunicator(std::shared_ptr<LoopbackWorld> world, int rank)
      : world_(std::move(world)), rank_(rank) {}

  int Rank() const override { return rank_; }
  int Size() const override { return world_->size(); }
  std::string_view BackendName() const override { return "loopback"; }
  bool HasNativeCollectives() const override { return true; }

  Status SendRecv(const void* send, size_t send_bytes, int dst, void* recv, size_t recv_bytes,
                  int src, int tag) override;
  // Sends are copied into the world's mailbox at once; receives are taken in Wait.
  StatusOr<std::unique_ptr<P2PBatch>> Start(const std::vector<P2POp>& ops) override;
  // Regions on the heap, shared by every rank's segment (freed with the last of them).
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
  Status GatherBytes(const std::string& mine, std::vector<std::string>* all, int root) override;
  Status BroadcastBytes(std::string* bytes, int root) override;
  Status AndBits(uint64_t* words, size_t count) override;

 private:
  std::shared_ptr<LoopbackWorld> world_;
  int rank_;
};

// A communicator over a subset of a LoopbackWorld's threads is simply another LoopbackWorld;
// this builds the node context of the thread world from a NodeMap: `local` and `cross`
// loopback worlds shared by the ranks of each group, created by whichever rank asks first.
class LoopbackNodeWorlds {
 public:
  LoopbackNodeWorlds(NodeMap map, std::chrono::milliseconds deadline);
  // The context of `rank` (thread-safe; each rank calls it once).
  std::shared_ptr<NodeContext> ContextFor(int rank);

 private:
  std::shared_ptr<LoopbackWorld> WorldFor(const std::string& key, int size);

  NodeMap map_;
  std::chrono::milliseconds deadline_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<LoopbackWorld>> worlds_;
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_LOOPBACK_LOOPBACK_COMMUNICATOR_H_
