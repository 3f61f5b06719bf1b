#include "collectives/select/collective_choice.h"

#include <utility>

#include "base/check.h"

namespace kolo {
namespace {

template <typename Entry>
Status CheckName(const char* knob, const std::string& name, const std::vector<Entry>& table) {
  if (name.empty() || name == "auto") return Status::OK();
  std::string valid = "auto";
  for (const Entry& e : table) {
    if (e.name == name) return Status::OK();
    valid += ", " + std::string(e.name);
  }
  return InvalidArgumentError(std::string(knob) + "=" + name + ": no such algorithm (" + valid +
                              ")");
}

// The host entry under `name`; host entries take every input, so this cannot fail.
template <typename Entry>
const Entry* HostEntry(const std::vector<Entry>& table, const char* collective,
                       const std::string& name) {
  auto picked = PickEntry(table, collective, name, CollectiveInput());
  KOLO_CHECK(picked.ok()) << ": " << picked.status().message();
  return *picked;
}

// Runs a host entry; kolo's own algorithms say which ran in an error, as the library's calls
// speak for themselves.
// On a communicator without collectives of its own (ucx), "auto" means the table's first of
// kolo's host algorithms instead of the library's; a named library entry still fails there,
// saying so.
template <typename Entry>
const Entry& ForComm(const Entry& picked, const std::vector<Entry>& table,
                     const std::string& name, const Communicator& comm) {
  if (!picked.library || comm.HasNativeCollectives() || !(name.empty() || name == "auto")) {
    return picked;
  }
  for (const Entry& e : table) {
    if (e.memory == MemoryKind::kHost && !e.library) return e;
  }
  return picked;
}

template <typename Entry, typename... Args>
Status RunHost(const Entry& picked, const std::vector<Entry>& table, const std::string& name,
               const char* collective, Communicator& comm, Args&&... args) {
  const Entry& entry = ForComm(picked, table, name, comm);
  Status s = entry.run(comm, std::forward<Args>(args)...);
  if (entry.library || s.ok()) return s;
  return s.AddContext(std::string(collective) + " (" + std::string(entry.name) + ")");
}

}  // namespace

CollectiveChoice::CollectiveChoice()
    : allgather_(HostEntry(AllgatherEntries(), "all-gather", "")),
      broadcast_(HostEntry(BroadcastEntries(), "broadcast", "")),
      reducescatter_(HostEntry(ReduceScatterEntries(), "reduce-scatter", "")),
      alltoall_(HostEntry(AlltoallEntries(), "all-to-all", "")) {}

StatusOr<CollectiveChoice> CollectiveChoice::Make(const CollectiveNames& names) {
  KOLO_RETURN_IF_ERROR(CheckName("KOLO_ALLGATHER_ALGO", names.allgather, AllgatherEntries()));
  KOLO_RETURN_IF_ERROR(CheckName("KOLO_BROADCAST_ALGO", names.broadcast, BroadcastEntries()));
  KOLO_RETURN_IF_ERROR(
      CheckName("KOLO_REDUCESCATTER_ALGO", names.reducescatter, ReduceScatterEntries()));
  KOLO_RETURN_IF_ERROR(CheckName("KOLO_ALLTOALL_ALGO", names.alltoall, AlltoallEntries()));
  CollectiveChoice c;
  c.names_ = names;
  c.allgather_ = HostEntry(AllgatherEntries(), "all-gather", names.allgather);
  c.broadcast_ = HostEntry(BroadcastEntries(), "broadcast", names.broadcast);
  c.reducescatter_ = HostEntry(ReduceScatterEntries(), "reduce-scatter", names.reducescatter);
  c.alltoall_ = HostEntry(AlltoallEntries(), "all-to-all", names.alltoall);
  return c;
}

Status CollectiveChoice::Allgatherv(Communicator& comm, const void* send, size_t send_bytes,
                                    void* recv, const std::vector<size_t>& recv_bytes) const {
  return RunHost(*allgather_, AllgatherEntries(), names_.allgather, "all-gather", comm, send,
                 send_bytes, recv, recv_bytes);
}

Status CollectiveChoice::Broadcast(Communicator& comm, void* buffer, size_t bytes, int root) const {
  return RunHost(*broadcast_, BroadcastEntries(), names_.broadcast, "broadcast", comm, buffer,
                 bytes, root);
}

Status CollectiveChoice::ReduceScatter(Communicator& comm, const void* send, void* recv,
                                       const std::vector<size_t>& counts, DataType dtype,
                                       ReduceOp op) {
  return RunHost(*reducescatter_, ReduceScatterEntries(), names_.reducescatter, "reduce-scatter",
                 comm, send, recv, counts, dtype, op, &scratch_);
}

Status CollectiveChoice::Alltoallv(Communicator& comm, const void* send,
                                   const std::vector<size_t>& send_bytes, void* recv,
                                   const std::vector<size_t>& recv_bytes) const {
  return RunHost(*alltoall_, AlltoallEntries(), names_.alltoall, "all-to-all", comm, send,
                 send_bytes, recv, recv_bytes);
}

StatusOr<const AllgatherEntry*> CollectiveChoice::PickAllgather(const CollectiveInput& in) const {
  return PickEntry(AllgatherEntries(), "all-gather", names_.allgather, in);
}

StatusOr<const BroadcastEntry*> CollectiveChoice::PickBroadcast(const CollectiveInput& in) const {
  return PickEntry(BroadcastEntries(), "broadcast", names_.broadcast, in);
}

StatusOr<const ReduceScatterEntry*> CollectiveChoice::PickReduceScatter(
    const CollectiveInput& in) const {
  return PickEntry(ReduceScatterEntries(), "reduce-scatter", names_.reducescatter, in);
}

StatusOr<const AlltoallEntry*> CollectiveChoice::PickAlltoall(const CollectiveInput& in) const {
  return PickEntry(AlltoallEntries(), "all-to-all", names_.alltoall, in);
}

}  // namespace kolo
