#include "collectives/host/tree_shapes.h"

namespace kolo {

TreeNode BinomialTreeNode(int rank, int size) {
  TreeNode node;
  const int low = rank & -rank;  // 0 for rank 0
  node.parent = rank == 0 ? -1 : rank - low;
  for (int mask = 1; mask < size && (rank == 0 || mask < low); mask <<= 1) {
    if (rank + mask < size) node.children.push_back(rank + mask);
  }
  return node;
}

namespace {

int Height(int label) { return __builtin_ctz(static_cast<unsigned>(label)); }

// Parent of `label` in the full in-order tree (label is not the root).
int FullParent(int label) {
  const int h = Height(label);
  const bool right_child = (label >> (h + 1)) & 1;
  return right_child ? label - (1 << h) : label + (1 << h);
}

// The root of the cut tree over labels 1..size: 2^(k-1) for the minimal k with 2^k - 1 >= size.
int RootLabel(int size) {
  int k = 1;
  while ((1 << k) - 1 < size) ++k;
  return 1 << (k - 1);
}

int CutParent(int label, int size) {
  if (label == RootLabel(size)) return 0;
  int up = FullParent(label);
  while (up > size) up = FullParent(up);
  return up;
}

}  // namespace

TreeNode DoubleBinaryTreeNode(int tree, int rank, int size) {
  // Label <-> rank maps of the two trees (see the header).
  auto label_of = [&](int r) {
    if (tree == 0) return r + 1;
    if (size % 2 == 0) return size - r;
    return r == 0 ? size : r;
  };
  auto rank_of = [&](int x) {
    if (tree == 0) return x - 1;
    if (size % 2 == 0) return size - x;
    return x == size ? 0 : x;
  };
  TreeNode node;
  const int me = label_of(rank);
  const int up = CutParent(me, size);
  node.parent = up == 0 ? -1 : rank_of(up);
  // Children in label order (left, then right). At most two: scan the labels whose cut parent
  // is `me`; they lie within me's span in the full tree, so the scan is short.
  const int h = Height(me);
  const int lo = me - (1 << h) + 1, hi = me + (1 << h) - 1;
  for (int x = lo; x <= hi && x <= size; ++x) {
    if (x != me && CutParent(x, size) == me) node.children.push_back(rank_of(x));
  }
  return node;
}

}  // namespace kolo
