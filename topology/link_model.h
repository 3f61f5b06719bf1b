// The link model: for a job's ranks on its nodes, the link every pair of local ranks crosses
// (host memory and GPU memory alike) and each rank's share of its NIC, and the bottlenecks the
// cost model reads (collectives/select/topology_cost.h). Pure function of shared facts (the node
// topologies every rank received, the rank layout), so every rank builds the same model.
//
// Rank placement follows the conventions users launch with: a GPU rank drives GPU
// local_rank % gpus (Horovod's torch.cuda.set_device(hvd.local_rank())) and, unless bound
// elsewhere, runs on that GPU's package; a CPU rank sits on the package it is bound to, or,
// when unbound or unknown, ranks fill packages in blocks (local rank l of L on P packages is on
// package l*P/L: two ranks on a 2-package node are taken to be on different packages). Each rank uses the NIC closest to its GPU (by PCI class), or to its
// package; ranks that share a NIC share its bandwidth.
#ifndef KOLO_TOPOLOGY_LINK_MODEL_H_
#define KOLO_TOPOLOGY_LINK_MODEL_H_

#include <string>
#include <vector>

#include "base/status.h"
#include "topology/topology.h"

namespace kolo {

struct Link {
  LinkClass cls = LinkClass::kUnknown;
  double gbps = 0;       // achievable, GB/s one direction
  double alpha_us = 0;   // start-up of one message over it
  int nvlinks = 0;       // NVLink links (kNVLink only)
  std::string basis;     // where the numbers come from, for kolo-topo and logs
};

// Where a job's ranks run; the same facts on every rank.
struct JobLayout {
  std::vector<int> node_of_rank;    // node index of each rank (0-based, nodes dense)
  std::vector<int> local_rank_of;   // rank inside its node
  std::vector<int> bound_package;   // package each rank is bound to, -1 unknown; may be empty
  std::vector<Topology> nodes;      // each node's topology, by node index
  // Nodes made by KOLO_NODE_GROUPING on one machine: their "network" is that machine's shared
  // memory, so the inter-node link is left to the cost model's default.
  bool simulated_nodes = false;

  // `nodes` copies of `topo` with `ranks_per_node` ranks each (kolo-topo's --nodes/--ranks-per-node).
  static JobLayout Uniform(const Topology& topo, int nodes, int ranks_per_node);
  int ranks() const { return static_cast<int>(node_of_rank.size()); }
};

struct RankPlace {
  int node = 0;
  int local_rank = 0;
  int package = -1;   // CPU side
  int gpu = -1;       // -1: the node has no GPU
  int nic = -1;       // closest NIC (to the GPU, else to the package); -1: none
};

struct NodeLinks {
  std::vector<int> ranks;                  // global ranks, local rank order
  std::vector<std::vector<Link>> host;     // local x local, host buffers
  std::vector<std::vector<Link>> device;   // local x local, GPU buffers (empty: no GPU)
  std::vector<Link> nic_host;              // per local rank: its share of its NIC
  std::vector<Link> nic_device;            // the same from GPU memory (GPUDirect path)
};

struct LinkModel {
  std::vector<RankPlace> ranks;
  std::vector<NodeLinks> nodes;
  bool homogeneous = true;        // same ranks per node and the same hardware on every node
  bool gpus = false;              // every node has a GPU
  bool multi_node = false;        // more than one real node
  // The slowest of each kind over the whole job (what one step of a flat algorithm waits for).
  Link intra_host, intra_device, inter_host, inter_device;
  int nic_sharers = 1;            // most ranks of one node that divide one NIC
  double cache_bytes = 0;         // smallest node's last-level cache (sum over its packages)
  std::vector<std::string> notes;
};

// kInvalidArgument when the layout is inconsistent (a rank's node has no topology, sizes
// differ), naming the rank.
StatusOr<LinkModel> BuildLinkModel(const JobLayout& job);

}  // namespace kolo

#endif  // KOLO_TOPOLOGY_LINK_MODEL_H_
