// Adasum's reference, from its definition (Maleki et al. 2021) in plain double: whole vectors,
// combined pairwise over the binary tree of ranks, the lower rank on the left, level by level
// (ranks (0,1), (2,3), ...; then those results; ...), the tree Horovod's VHDD combines over.
// No halving, no pieces and no kolo code, so it checks the algorithm rather than mirroring it.
// Header-only and free of kolo's headers: the MPI suites (tests/mpi) use it too.
#ifndef KOLO_TESTS_UNIT_ADASUM_REFERENCE_H_
#define KOLO_TESTS_UNIT_ADASUM_REFERENCE_H_

#include <cfloat>
#include <cmath>
#include <cstddef>
#include <vector>

namespace kolo::testing {

// Adasum(a, b) = (1 - a.b / (2|a|^2)) a + (1 - a.b / (2|b|^2)) b; a coefficient is 1 when its
// squared norm is below sqrt(DBL_MIN) (Horovod's rule, so a zero vector is the identity).
inline std::vector<double> AdasumPair(const std::vector<double>& a, const std::vector<double>& b) {
  double dot = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  const double tiny = std::sqrt(DBL_MIN);
  const double ca = aa >= tiny ? 1 - dot / (2 * aa) : 1;
  const double cb = bb >= tiny ? 1 - dot / (2 * bb) : 1;
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = ca * a[i] + cb * b[i];
  return out;
}

// inputs[r]: rank r's tensor (equal lengths); the rank count must be a power of two.
inline std::vector<double> AdasumReference(std::vector<std::vector<double>> inputs) {
  for (size_t d = 1; d < inputs.size(); d *= 2) {
    for (size_t r = 0; r + d < inputs.size(); r += 2 * d) {
      inputs[r] = AdasumPair(inputs[r], inputs[r + d]);
    }
  }
  return inputs.empty() ? std::vector<double>() : inputs[0];
}

}  // namespace kolo::testing

#endif  // KOLO_TESTS_UNIT_ADASUM_REFERENCE_H_
