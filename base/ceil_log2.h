// ceil(log2 n): the rounds of a binomial tree or of recursive doubling over n ranks, which the
// host trees and the cost formulas of every transport count alike.
#ifndef KOLO_BASE_CEIL_LOG2_H_
#define KOLO_BASE_CEIL_LOG2_H_

namespace kolo {

// 0 for n <= 1.
inline int CeilLog2(int n) {
  int d = 0;
  while ((1 << d) < n) ++d;
  return d;
}

}  // namespace kolo

#endif  // KOLO_BASE_CEIL_LOG2_H_
