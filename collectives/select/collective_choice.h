// Which entry of collective_table.h runs the runtime's all-gather, broadcast, reduce-scatter
// and all-to-all. KOLO_ALLGATHER_ALGO, KOLO_BROADCAST_ALGO, KOLO_REDUCESCATTER_ALGO and
// KOLO_ALLTOALL_ALGO name an entry ("auto": the table's default for the buffers' memory kind);
// a name binds buffers of its entry's memory kind only, so forcing kolo's ring for host
// buffers leaves device buffers to NCCL.
#ifndef KOLO_COLLECTIVES_SELECT_COLLECTIVE_CHOICE_H_
#define KOLO_COLLECTIVES_SELECT_COLLECTIVE_CHOICE_H_

#include <string>
#include <vector>

#include "collectives/select/collective_table.h"

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
  CollectiveChoice();

  // Host buffers: same contracts as the Communicator calls of the same names.
  Status Allgatherv(Communicator& comm, const void* send, size_t send_bytes, void* recv,
                    const std::vector<size_t>& recv_bytes) const;
  Status Broadcast(Communicator& comm, void* buffer, size_t bytes, int root) const;
  Status ReduceScatter(Communicator& comm, const void* send, void* recv,
                       const std::vector<size_t>& counts, DataType dtype, ReduceOp op);
  Status Alltoallv(Communicator& comm, const void* send, const std::vector<size_t>& send_bytes,
                   void* recv, const std::vector<size_t>& recv_bytes) const;

  // The entry for `in` (PickEntry under this choice's names): the device path enqueues
  // through it.
  StatusOr<const AllgatherEntry*> PickAllgather(const CollectiveInput& in) const;
  StatusOr<const BroadcastEntry*> PickBroadcast(const CollectiveInput& in) const;
  StatusOr<const ReduceScatterEntry*> PickReduceScatter(const CollectiveInput& in) const;
  StatusOr<const AlltoallEntry*> PickAlltoall(const CollectiveInput& in) const;

 private:
  CollectiveNames names_;
  // The host entries, picked once: no host entry refuses an input.
  const AllgatherEntry* allgather_ = nullptr;
  const BroadcastEntry* broadcast_ = nullptr;
  const ReduceScatterEntry* reducescatter_ = nullptr;
  const AlltoallEntry* alltoall_ = nullptr;
  std::vector<char> scratch_;  // kolo's reduce-scatter's, kept between calls
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_SELECT_COLLECTIVE_CHOICE_H_
