// How a communicator's ranks group into nodes, and the sub-communicators that the hierarchical
// and shared-memory algorithms run over (UCC's node / node-leader / cross subgroups).
//
// Grouping comes from the hardware (MPI_COMM_TYPE_SHARED) or from KOLO_NODE_GROUPING, which
// lets one machine pose as several nodes so hierarchical paths are tested under plain mpirun:
//   "2x2"       2 nodes of 2 consecutive ranks each (ranks 0,1 | 2,3)
//   "3+2"       node sizes in rank order (0,1,2 | 3,4)
//   "0,0,1,1"   a node id per rank (any integers; ranks with equal ids share a node)
// Every rank derives the same NodeMap from the same facts, so algorithm choices agree.
#ifndef KOLO_COLLECTIVES_NODE_CONTEXT_H_
#define KOLO_COLLECTIVES_NODE_CONTEXT_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "collectives/communicator.h"

namespace kolo {

struct NodeMap {
  // Node index of every rank; nodes are numbered in order of their lowest rank.
  std::vector<int> node_of_rank;
  // Rank inside its node (ranks of a node in ascending order).
  std::vector<int> local_rank_of;
  // Ranks per node, by node index.
  std::vector<int> node_sizes;

  int ranks() const { return static_cast<int>(node_of_rank.size()); }
  int nodes() const { return static_cast<int>(node_sizes.size()); }
  int max_local_size() const;
  int min_local_size() const;
  // Every node has the same number of ranks.
  bool uniform() const { return max_local_size() == min_local_size(); }
  // "2 nodes: 0-1 | 2-3" style summary for logs and errors.
  std::string Describe() const;

  // All `size` ranks on one node.
  static NodeMap OneNode(int size);
  // From a node id per rank (equal ids share a node); ids are arbitrary integers.
  static NodeMap FromNodeIds(const std::vector<int>& ids);
  // From a KOLO_NODE_GROUPING string (formats above) for `size` ranks; kInvalidArgument naming
  // the string and what is wrong (e.g. "3+2 covers 5 ranks, the job has 4").
  static StatusOr<NodeMap> Parse(std::string_view spec, int size);
};

// Owned by the communicator it describes (Communicator::set_node); shared so sub-communicators
// outlive every algorithm that cached a pointer into them.
struct NodeContext {
  NodeMap map;
  // Ranks of my node, local rank order; its Rank() is my local rank.
  std::unique_ptr<Communicator> local;
  // One rank per node: those whose local rank equals mine, node order; its Rank() is my node's
  // index among them. On non-uniform groupings nodes with fewer ranks are absent from the
  // cross communicators of the higher local ranks.
  std::unique_ptr<Communicator> cross;
  // Whether `local` can allocate shared memory (probed once when the context was built, so the
  // selector knows before it picks the shared-memory algorithms); `shm_reason` says why not.
  bool shm_capable = false;
  std::string shm_reason;
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_NODE_CONTEXT_H_
