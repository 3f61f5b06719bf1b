// kolo's own host algorithms for the collectives other than all-reduce, listed so a selector
// can rank them next to the library's (Communicator's native Allgatherv, Broadcast, ...):
// one table per collective, each entry a name, its cost formula in words, the formula as a
// function and the entry point. The algorithms run over Communicator point-to-point only and
// have the same contracts as the native collectives in collectives/communicator.h. Steps and
// bytes per algorithm: collectives/ALGORITHMS.md and the prose atop each file.
//
// Cost model: Hockney's alpha-beta-gamma (cost_model.h), p ranks, n bytes as defined per
// collective below; formulas from Thakur, Rabenseifner & Gropp 2005 (sec. 4) unless noted.
#ifndef KOLO_COLLECTIVES_HOST_HOST_COLLECTIVES_H_
#define KOLO_COLLECTIVES_HOST_HOST_COLLECTIVES_H_

#include <string_view>
#include <vector>

#include "collectives/select/cost_model.h"
#include "collectives/host/allgatherv.h"
#include "collectives/host/alltoallv.h"
#include "collectives/host/broadcast.h"
#include "collectives/host/reduce_scatter.h"

namespace kolo {

struct HostCostInput {
  int ranks = 1;
  // all-gather: bytes gathered per rank (the whole result); broadcast: the buffer;
  // reduce-scatter: each rank's input (all blocks); all-to-all: bytes each rank sends.
  double bytes = 0;
  LinkCost link;
  double gamma_us = 0;  // reduction, per byte (reduce-scatter only)
};

template <typename Fn>
struct HostAlgorithm {
  std::string_view name;
  std::string_view cost;  // the formula, for logs and kolo-topo
  double (*estimate_us)(const HostCostInput&);
  Fn run;
};

using AllgathervFn = Status (*)(Communicator&, const void* send, size_t send_bytes, void* recv,
                                const std::vector<size_t>& recv_bytes);
using BroadcastFn = Status (*)(Communicator&, void* buffer, size_t bytes, int root);
using ReduceScatterFn = Status (*)(Communicator&, const void* send, void* recv,
                                   const std::vector<size_t>& counts, DataType, ReduceOp,
                                   std::vector<char>* scratch);
using AlltoallvFn = Status (*)(Communicator&, const void* send,
                               const std::vector<size_t>& send_bytes, void* recv,
                               const std::vector<size_t>& recv_bytes);

const std::vector<HostAlgorithm<AllgathervFn>>& HostAllgathervAlgorithms();
const std::vector<HostAlgorithm<BroadcastFn>>& HostBroadcastAlgorithms();
const std::vector<HostAlgorithm<ReduceScatterFn>>& HostReduceScatterAlgorithms();
const std::vector<HostAlgorithm<AlltoallvFn>>& HostAlltoallvAlgorithms();

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_HOST_HOST_COLLECTIVES_H_
