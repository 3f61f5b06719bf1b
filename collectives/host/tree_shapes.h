// Rank arithmetic of the trees the tree all-reduces run over: pure functions of (rank, size),
// unit-tested without any transport (tests/unit/host_collectives_test.cc).
//
// Binomial tree rooted at rank 0: rank r's parent is r minus its lowest set bit; its children
// are r + 2^k for every 2^k below that bit (below p for rank 0) that is still a rank. Depth
// ceil(log2 p); rank 0 has ceil(log2 p) children.
//
// In-order binary tree (Sanders, Speck & Traeff 2009, sec. 3): ranks are labelled 1..p and
// placed in the in-order binary tree of 2^k - 1 nodes (k minimal with 2^k - 1 >= p), whose
// node x sits at height ctz(x). Labels above p are cut off; a node whose parent was cut off
// hangs from its nearest surviving ancestor, which keeps every node at <= 2 children (a node
// loses at most its right child and gains at most that child's surviving left descendant).
// Every odd label is a leaf. The double binary tree uses two such trees whose labels of rank r
// are x = r + 1 (tree 0) and, for tree 1, the mirror x = p - r when p is even or the shift
// x = r (rank 0 -> p) when p is odd: either way an even label of tree 0 becomes an odd one of
// tree 1, so every rank is interior in at most one of the two trees.
#ifndef KOLO_COLLECTIVES_HOST_TREE_SHAPES_H_
#define KOLO_COLLECTIVES_HOST_TREE_SHAPES_H_

#include <vector>

#include "base/ceil_log2.h"  // CeilLog2: the binomial tree's depth

namespace kolo {

// One rank's place in a tree: parent (-1 at the root) and children in reduction order.
struct TreeNode {
  int parent = -1;
  std::vector<int> children;
};

TreeNode BinomialTreeNode(int rank, int size);

// Tree 0 or 1 of the double binary tree (size >= 1).
TreeNode DoubleBinaryTreeNode(int tree, int rank, int size);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_HOST_TREE_SHAPES_H_
