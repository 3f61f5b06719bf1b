// One table per collective other than all-reduce (whose algorithms are classes with their own
// registry: registry.h), host and device entries alike. As in UCC's components, an entry says
// what it supports or why not; it also says what it costs (kolo's own, whose formulas are in
// host_collectives.h) and how it runs: a host entry runs to completion, a device entry only
// enqueues on kolo's stream of the buffers' device (collectives/nccl/nccl_collectives.h).
//
// Table order is preference order: the first entry of an input's memory kind that supports it
// is the default, which is the library's own on the host ("mpi": Open MPI's tuned component
// already switches between the same algorithms by size, so a cost model would only repeat its
// choice; kolo's exist for backends without native collectives and to compare) and NCCL's on
// the device. CollectiveChoice (collective_choice.h) applies the KOLO_<COLLECTIVE>_ALGO names.
#ifndef KOLO_COLLECTIVES_SELECT_COLLECTIVE_TABLE_H_
#define KOLO_COLLECTIVES_SELECT_COLLECTIVE_TABLE_H_

#include <string>
#include <string_view>
#include <vector>

#include "collectives/algorithm.h"
#include "collectives/host/host_collectives.h"

namespace kolo {

// What an entry decides on: where the buffers are and, for reduce-scatter, what it reduces
// (the operation on the wire: Average arrives lowered to Sum).
struct CollectiveInput {
  MemoryKind memory = MemoryKind::kHost;
  DataType dtype = DataType::kUInt8;
  ReduceOp op = ReduceOp::kSum;
};

// The device entries' entry points: they enqueue on kolo's stream of `device` and return
// without waiting, with the contracts of collectives/nccl/nccl_collectives.h.
using DeviceAllgathervFn = Status (*)(Communicator&, int device, const void* send, void* recv,
                                      const std::vector<size_t>& part_bytes);
using DeviceBroadcastFn = Status (*)(Communicator&, int device, void* buffer, size_t bytes,
                                     int root);
using DeviceReduceScatterFn = Status (*)(Communicator&, int device, const void* send, void* recv,
                                         size_t count, DataType, ReduceOp);
using DeviceAlltoallvFn = Status (*)(Communicator&, int device, const void* send,
                                     const std::vector<size_t>& send_bytes, void* recv,
                                     const std::vector<size_t>& recv_bytes);

template <typename HostFn, typename DeviceFn>
struct CollectiveEntry {
  std::string_view name;  // what KOLO_<COLLECTIVE>_ALGO names it by
  MemoryKind memory;
  bool library = false;   // the communication library's own call (no cost model of kolo's)
  std::string_view cost;  // kolo's formula, for logs; "" when library
  double (*estimate_us)(const HostCostInput&) = nullptr;     // nullptr when library
  std::string (*why_not)(const CollectiveInput&) = nullptr;  // "" or nullptr: runs any input
  HostFn run = nullptr;                                      // host entries
  DeviceFn enqueue = nullptr;                                // device entries
};

using AllgatherEntry = CollectiveEntry<AllgathervFn, DeviceAllgathervFn>;
using BroadcastEntry = CollectiveEntry<BroadcastFn, DeviceBroadcastFn>;
using ReduceScatterEntry = CollectiveEntry<ReduceScatterFn, DeviceReduceScatterFn>;
using AlltoallEntry = CollectiveEntry<AlltoallvFn, DeviceAlltoallvFn>;

const std::vector<AllgatherEntry>& AllgatherEntries();
const std::vector<BroadcastEntry>& BroadcastEntries();
const std::vector<ReduceScatterEntry>& ReduceScatterEntries();
const std::vector<AlltoallEntry>& AlltoallEntries();

// Why `entry` cannot run `in`, or "".
template <typename Entry>
std::string WhyNot(const Entry& entry, const CollectiveInput& in) {
  if (entry.memory != in.memory) {
    return std::string("runs on ") + (entry.memory == MemoryKind::kCuda ? "cuda" : "host") +
           " buffers";
  }
  return entry.why_not ? entry.why_not(in) : std::string();
}

// The entry that runs `in`: the one named `forced` when it is of in's memory kind (a name of
// the other kind leaves this kind to the default), else the first of the kind that supports
// it. kUnimplemented naming each candidate and why not when none can. `collective` names the
// collective in that message ("all-gather").
template <typename Entry>
StatusOr<const Entry*> PickEntry(const std::vector<Entry>& table, std::string_view collective,
                                 std::string_view forced, const CollectiveInput& in) {
  const Entry* named = nullptr;
  for (const Entry& e : table) {
    if (e.name == forced && e.memory == in.memory) named = &e;
  }
  std::string rejected;
  for (const Entry& e : table) {
    if (named && &e != named) continue;
    if (!named && e.memory != in.memory) continue;
    const std::string why = WhyNot(e, in);
    if (why.empty()) return &e;
    rejected += (rejected.empty() ? "" : "; ") + std::string(e.name) + ": " + why;
  }
  return UnimplementedError(std::string("no ") + std::string(collective) + " for " +
                            (in.memory == MemoryKind::kCuda ? "cuda" : "host") + " buffers of " +
                            std::string(DataTypeName(in.dtype)) + " (" + rejected + ")");
}

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_SELECT_COLLECTIVE_TABLE_H_
