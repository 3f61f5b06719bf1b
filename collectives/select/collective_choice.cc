#include "collectives/select/collective_choice.h"

namespace kolo {
namespace {

template <typename Fn>
Status Pick(const char* knob, const std::string& name,
            const std::vector<HostAlgorithm<Fn>>& table, const HostAlgorithm<Fn>** out) {
  *out = nullptr;
  if (name.empty() || name == "auto" || name == "mpi") return Status::OK();
  std::string valid = "auto, mpi";
  for (const auto& algo : table) {
    if (algo.name == name) {
      *out = &algo;
      return Status::OK();
    }
    valid += ", " + std::string(algo.name);
  }
  return InvalidArgumentError(std::string(knob) + "=" + name + ": no such algorithm (" + valid +
                              ")");
}

}  // namespace

StatusOr<CollectiveChoice> CollectiveChoice::Make(const CollectiveNames& names) {
  CollectiveChoice c;
  KOLO_RETURN_IF_ERROR(
      Pick("KOLO_ALLGATHER_ALGO", names.allgather, HostAllgathervAlgorithms(), &c.allgather_));
  KOLO_RETURN_IF_ERROR(
      Pick("KOLO_BROADCAST_ALGO", names.broadcast, HostBroadcastAlgorithms(), &c.broadcast_));
  KOLO_RETURN_IF_ERROR(Pick("KOLO_REDUCESCATTER_ALGO", names.reducescatter,
                            HostReduceScatterAlgorithms(), &c.reducescatter_));
  KOLO_RETURN_IF_ERROR(
      Pick("KOLO_ALLTOALL_ALGO", names.alltoall, HostAlltoallvAlgorithms(), &c.alltoall_));
  return c;
}

Status CollectiveChoice::Allgatherv(Communicator& comm, const void* send, size_t send_bytes,
                                    void* recv, const std::vector<size_t>& recv_bytes) const {
  if (!allgather_) return comm.Allgatherv(send, send_bytes, recv, recv_bytes);
  return allgather_->run(comm, send, send_bytes, recv, recv_bytes)
      .AddContext("all-gather (" + std::string(allgather_->name) + ")");
}

Status CollectiveChoice::Broadcast(Communicator& comm, void* buffer, size_t bytes,
                                   int root) const {
  if (!broadcast_) return comm.Broadcast(buffer, bytes, root);
  return broadcast_->run(comm, buffer, bytes, root)
      .AddContext("broadcast (" + std::string(broadcast_->name) + ")");
}

Status CollectiveChoice::ReduceScatter(Communicator& comm, const void* send, void* recv,
                                       const std::vector<size_t>& counts, DataType dtype,
                                       ReduceOp op) {
  if (!reducescatter_) return comm.ReduceScatter(send, recv, counts, dtype, op);
  return reducescatter_->run(comm, send, recv, counts, dtype, op, &scratch_)
      .AddContext("reduce-scatter (" + std::string(reducescatter_->name) + ")");
}

Status CollectiveChoice::Alltoallv(Communicator& comm, const void* send,
                                   const std::vector<size_t>& send_bytes, void* recv,
                                   const std::vector<size_t>& recv_bytes) const {
  if (!alltoall_) return comm.Alltoallv(send, send_bytes, recv, recv_bytes);
  return alltoall_->run(comm, send, send_bytes, recv, recv_bytes)
      .AddContext("all-to-all (" + std::string(alltoall_->name) + ")");
}

}  // namespace kolo
