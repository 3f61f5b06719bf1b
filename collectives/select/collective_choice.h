// Which implementation runs the runtime's all-gather, broadcast, reduce-scatter and all-to-all:
// the library's own (Communicator's native call; "mpi", the default) or one of kolo's host
// algorithms (host_collectives.h), forced by name through KOLO_ALLGATHER_ALGO,
// KOLO_BROADCAST_ALGO, KOLO_REDUCESCATTER_ALGO and KOLO_ALLTOALL_ALGO. "auto" is the library:
// Open MPI's tuned component already switches between the same algorithms (ring, recursive
// doubling, binomial, scatter + all-gather, pairwise) by size, so the cost model would only
// repeat its choice; kolo's own exist for backends without native collectives and to compare.
#ifndef KOLO_COLLECTIVES_SELECT_COLLECTIVE_CHOICE_H_
#define KOLO_COLLECTIVES_SELECT_COLLECTIVE_CHOICE_H_

#include <string>
#include <vector>

#include "collectives/host/host_collectives.h"

namespace kolo {

struct CollectiveNames {
  std::string allgather = "auto";
  std::string broadcast = "auto";
  std::string reducescatter = "auto";
  std::string alltoall = "auto";
};

class CollectiveChoice {
 public:
  // kInvalidArgument naming the knob, the name and the valid names when one is unknown.
  static StatusOr<CollectiveChoice> Make(const CollectiveNames& names);
  CollectiveChoice() = default;

  // Same contracts as the Communicator calls of the same names.
  Status Allgatherv(Communicator& comm, const void* send, size_t send_bytes, void* recv,
                    const std::vector<size_t>& recv_bytes) const;
  Status Broadcast(Communicator& comm, void* buffer, size_t bytes, int root) const;
  Status ReduceScatter(Communicator& comm, const void* send, void* recv,
                       const std::vector<size_t>& counts, DataType dtype, ReduceOp op);
  Status Alltoallv(Communicator& comm, const void* send, const std::vector<size_t>& send_bytes,
                   void* recv, const std::vector<size_t>& recv_bytes) const;

 private:
  // nullptr: the library's.
  const HostAlgorithm<AllgathervFn>* allgather_ = nullptr;
  const HostAlgorithm<BroadcastFn>* broadcast_ = nullptr;
  const HostAlgorithm<ReduceScatterFn>* reducescatter_ = nullptr;
  const HostAlgorithm<AlltoallvFn>* alltoall_ = nullptr;
  std::vector<char> scratch_;  // reduce-scatter's, kept between calls
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_SELECT_COLLECTIVE_CHOICE_H_
