// The link a pipelined tree all-reduce's steps wait for across nodes (tree and dbtree's cost).
//
// A pipelined tree moves a segment over all of its edges at once, so a step lasts as long as
// its busiest link, and across nodes that is a node's NIC, carrying every tree edge that leaves
// the node in the same phase. With ranks placed by node (mpirun's and torchrun's default) in
// nodes of L ranks, how many depends on the tree and the layout, not on the message:
//  - binomial tree, 2 nodes x 2 ranks: at most one edge leaves a node in a phase, so that flow
//    has the NIC alone (a flat link, charged as every rank of the node crossing at once, made the
//    model 1.8x too slow there, docs/benchmarks.md "Across nodes");
//  - binomial tree, 4 nodes x 1: the root sends the broadcast to its children at distance 1 and
//    2, both off its node: two flows share the root node's NIC (the flat model was 2x too fast);
//  - double binary tree: each tree carries half the message; 2 x 2 and 4 x 1 both load the
//    busiest NIC with two half-message edges per phase.
// TreeNodeEgress counts this from the trees themselves (tree_shapes.h): the largest, over nodes
// and over the reduce and broadcast phases, sum of the message fractions on the edges leaving
// one node. TreeLink charges a step that many times the NIC-alone time per byte of one flow one
// way, and inter_duplex more where the node's link carries edges coming in during the same
// phase (TreeNodeEgressBothWays): the double binary tree's, whose ranks send up one tree while
// their children send up the other; not the binomial tree's at 2 x 2, whose phases each cross
// one way. Charging the binomial tree the duplex rate too made its model 8-29% slow once its
// segments went eagerly (pipeline_segment.h; docs/benchmarks.md, "Tree segments that fit an eager
// send").
#ifndef KOLO_COLLECTIVES_HOST_TREE_LINK_H_
#define KOLO_COLLECTIVES_HOST_TREE_LINK_H_

#include "collectives/algorithm.h"

namespace kolo {

enum class TreeShape { kBinomial, kDoubleBinary };

// For `ranks` ranks placed by node in nodes of `local_size` (rank r on node r / local_size):
// the busiest node's outgoing share of a segment per pipeline step, in message fractions (a
// binomial tree's edge carries 1, a double binary tree's 1/2). 0 when nothing leaves a node.
double TreeNodeEgress(TreeShape shape, int ranks, int local_size);

// The same, over only the nodes and phases in which edges also come into the node across
// nodes (its link carries flows both ways at once); 0 when there are none.
double TreeNodeEgressBothWays(TreeShape shape, int ranks, int local_size);

// The α and β of one pipeline step of `shape` for `in`: intra on one node; across nodes of one
// size, inter's α and the larger of TreeNodeEgress times the one-way NIC-alone β and
// TreeNodeEgressBothWays times that and inter_duplex (never below intra's β); across nodes of
// different sizes, where the placement is not known, the flat link.
LinkCost TreeLink(const SelectionInput& in, TreeShape shape);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_HOST_TREE_LINK_H_
