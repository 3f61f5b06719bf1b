#include "collectives/select/collective_table.h"

#include "collectives/nccl/nccl_supports.h"
#include "kolo/config.h"

#if KOLO_WITH_NCCL
#include "collectives/nccl/nccl_collectives.h"
#endif

namespace kolo {
namespace {

// The library's own calls, as host entries.
Status LibraryAllgatherv(Communicator& comm, const void* send, size_t send_bytes, void* recv,
                         const std::vector<size_t>& recv_bytes) {
  return comm.Allgatherv(send, send_bytes, recv, recv_bytes);
}
Status LibraryBroadcast(Communicator& comm, void* buffer, size_t bytes, int root) {
  return comm.Broadcast(buffer, bytes, root);
}
Status LibraryReduceScatter(Communicator& comm, const void* send, void* recv,
                            const std::vector<size_t>& counts, DataType dtype, ReduceOp op,
                            std::vector<char>*) {
  return comm.ReduceScatter(send, recv, counts, dtype, op);
}
Status LibraryAlltoallv(Communicator& comm, const void* send, const std::vector<size_t>& send_bytes,
                        void* recv, const std::vector<size_t>& recv_bytes) {
  return comm.Alltoallv(send, send_bytes, recv, recv_bytes);
}

// NCCL's entries: what this build and NCCL's types allow.
std::string NcclBuilt(const CollectiveInput&) {
  return KOLO_WITH_NCCL ? "" : "kolo was built without NCCL (KOLO_WITH_NCCL=OFF)";
}
std::string NcclReduces(const CollectiveInput& in) {
  const std::string built = NcclBuilt(in);
  return built.empty() ? NcclSupports(in.dtype, in.op) : built;
}

#if KOLO_WITH_NCCL
constexpr DeviceAllgathervFn kNcclAllgatherv = &EnqueueNcclAllgatherv;
constexpr DeviceBroadcastFn kNcclBroadcast = &EnqueueNcclBroadcast;
constexpr DeviceReduceScatterFn kNcclReduceScatter = &EnqueueNcclReduceScatter;
constexpr DeviceAlltoallvFn kNcclAlltoallv = &EnqueueNcclAlltoallv;
#else
constexpr DeviceAllgathervFn kNcclAllgatherv = nullptr;
constexpr DeviceBroadcastFn kNcclBroadcast = nullptr;
constexpr DeviceReduceScatterFn kNcclReduceScatter = nullptr;
constexpr DeviceAlltoallvFn kNcclAlltoallv = nullptr;
#endif

// The library's entry, then kolo's host algorithms, then NCCL's.
template <typename Entry, typename HostFn, typename DeviceFn>
std::vector<Entry> Table(HostFn library, const std::vector<HostAlgorithm<HostFn>>& own,
                         DeviceFn nccl, std::string (*nccl_why_not)(const CollectiveInput&)) {
  std::vector<Entry> table;
  table.push_back(
      {"mpi", MemoryKind::kHost, /*library=*/true, "", nullptr, nullptr, library, nullptr});
  for (const HostAlgorithm<HostFn>& a : own) {
    table.push_back(
        {a.name, MemoryKind::kHost, false, a.cost, a.estimate_us, nullptr, a.run, nullptr});
  }
  table.push_back(
      {"nccl", MemoryKind::kCuda, /*library=*/true, "", nullptr, nccl_why_not, nullptr, nccl});
  return table;
}

}  // namespace

const std::vector<AllgatherEntry>& AllgatherEntries() {
  static const auto table = Table<AllgatherEntry>(&LibraryAllgatherv, HostAllgathervAlgorithms(),
                                                  kNcclAllgatherv, &NcclBuilt);
  return table;
}

const std::vector<BroadcastEntry>& BroadcastEntries() {
  static const auto table = Table<BroadcastEntry>(&LibraryBroadcast, HostBroadcastAlgorithms(),
                                                  kNcclBroadcast, &NcclBuilt);
  return table;
}

const std::vector<ReduceScatterEntry>& ReduceScatterEntries() {
  static const auto table = Table<ReduceScatterEntry>(
      &LibraryReduceScatter, HostReduceScatterAlgorithms(), kNcclReduceScatter, &NcclReduces);
  return table;
}

const std::vector<AlltoallEntry>& AlltoallEntries() {
  static const auto table = Table<AlltoallEntry>(&LibraryAlltoallv, HostAlltoallvAlgorithms(),
                                                 kNcclAlltoallv, &NcclBuilt);
  return table;
}

}  // namespace kolo
