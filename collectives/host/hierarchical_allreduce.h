// Hierarchical all-reduce ("hierarchical"): Horovod's three phases (Sergeev & Del Balso 2018,
// HOROVOD_HIERARCHICAL_ALLREDUCE), with the pieces of Thakur, Rabenseifner & Gropp (2005):
//
//   phase | over              | rank with local rank k (k < m) does
//   ------+-------------------+-----------------------------------------------------------------
//   1     | node()->local     | reduce-scatter: receives slice k of every local rank's piece and
//         |                   | reduces it in local-rank order (ranks k >= m only contribute)
//   2     | node()->cross     | all-reduces its slice with the owners of slice k on every other
//         |                   | node (a flat algorithm: ChooseCross(), by the cost model)
//   3     | node()->local     | all-gather: every local rank gets every reduced slice
//
// m = min_local_size: the data of each piece is cut into m slices, owned by local ranks
// 0..m-1 on every node. That keeps the cross-node step on the cross communicators kolo builds
// (local rank k's: the nodes that have a k-th rank), which for k < m hold every node, so uneven
// groupings (3+2, 1+3) need no other communicator; the price is that on a bigger node local
// ranks m.. only feed the reduction. With even nodes m = ranks per node and the cross-node bytes
// per rank are 2 (N-1)/N x n/m (N nodes), the point of the algorithm.
//
// Phases 1 and 3 run through the node's shared segment when the node can share memory
// (ShmNodeReducer, shm_allreduce.h: copy in, flag barrier, reduce, [phase 2 on the owner],
// barrier, copy out), else over point-to-point messages on node()->local: a direct
// reduce-scatter (each rank sends slice k straight to owner k; the owner reduces in local-rank
// order, which a ring would not: the ring's order differs per slice) and a direct all-gather,
// (L-1) messages per rank per phase, bytes sent per rank n(L-1)/L as in a ring. Both work on the
// same pieces (2 MiB) and slices, so nodes on different paths still make matching cross calls.
// Every element is reduced by one owner per node, then all-reduced once across nodes and copied
// everywhere: every rank ends with the same bits.
//
// Cost (N nodes, L ranks on the biggest node, m = min_local_size, n bytes, K = ceil(n/P)):
//   shm:   2 n copy_us + (L-1) n/m gamma_us + 2 K sync_us
//   p2p:   2 K (L-1) alpha_intra + 2 n (L-1)/L beta_intra + (L-1) n/m gamma_us
//   cross: K x the cost of phase 2's pick for one slice of a piece (n/(K m) bytes over N
//          ranks), as the chooser costed it: with m owners per node crossing at once each flow
//          has its share of the NIC, with one it is the flat all-reduce over the nodes. (For
//          Rabenseifner, 2 K log2(N) alpha_inter + 2 (N-1)/N n/m (beta_inter + gamma_us/2).)
#ifndef KOLO_COLLECTIVES_HOST_HIERARCHICAL_ALLREDUCE_H_
#define KOLO_COLLECTIVES_HOST_HIERARCHICAL_ALLREDUCE_H_

#include <functional>
#include <vector>

#include "collectives/algorithm.h"
#include "collectives/host/shm_node.h"
#include "collectives/native_allreduce.h"

namespace kolo {

class HierarchicalAllreduce : public AllreduceAlgorithm {
 public:
  // Phase 2's flat all-reduce for one slice, and its cost in microseconds as the chooser costed
  // it (which cost model prices a slice depends on how many slices cross at once).
  struct CrossChoice {
    AllreduceAlgorithm* algorithm = nullptr;  // nullptr: the library's
    double micros = 0;
  };
  // Picks the flat all-reduce of phase 2 from facts that every member of a cross communicator
  // shares (the input describes one slice over the cross communicator; `flows_per_node` is how
  // many slices cross from each node at once, one per owner).
  using CrossChooser = std::function<CrossChoice(const SelectionInput& cross, int flows_per_node)>;

  explicit HierarchicalAllreduce(CrossChooser choose_cross = nullptr);

  std::string_view Name() const override { return "hierarchical"; }
  Status Supports(const SelectionInput& in) const override;
  double EstimateMicros(const SelectionInput& in) const override;
  Status Run(Communicator& comm, const AllreduceArgs& args) override;

  // Tests: piece size and wait timeout of both paths; the point-to-point path even where the
  // node can share memory. Same on every rank, before the first Run.
  ShmNodeReducer& reducer() { return reducer_; }
  void set_point_to_point(bool on) { force_point_to_point_ = on; }

 protected:
  // float32/float64: each owner scales its slice right after phase 2 (the cross-node
  // algorithm's RunScaled where it has one, else a pass over the slice while it is in cache),
  // so phase 3 copies scaled values and Average costs no pass over the whole message.
  bool ScalesInItsOwnPass() const override { return true; }
  Status RunWithPostscale(Communicator& comm, const AllreduceArgs& args, double postscale) override;

 private:
  static SelectionInput SliceInput(const SelectionInput& top, size_t piece_count, int owners,
                                   int nodes);
  // What phase 2 runs for `cross` (one slice over the cross communicator), and its cost.
  CrossChoice ChooseCross(const SelectionInput& cross, int flows_per_node) const;
  Status RunPointToPoint(Communicator& local, const AllreduceArgs& args, int owners,
                         const ShmNodeReducer::SliceHook& hook);

  CrossChooser choose_cross_;
  NativeAllreduce native_;
  CostModel cross_cost_;
  ShmNodeReducer reducer_;
  bool force_point_to_point_ = false;
  std::vector<char> scratch_;  // point-to-point receive slices + result, grown once, kept
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_HOST_HIERARCHICAL_ALLREDUCE_H_
