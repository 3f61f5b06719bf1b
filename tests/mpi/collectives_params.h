// What the collectives' MPI tests share: the shapes they use and the names of their
// dtype-parameterised cases.
#ifndef KOLO_TESTS_MPI_COLLECTIVES_PARAMS_H_
#define KOLO_TESTS_MPI_COLLECTIVES_PARAMS_H_

#include <kolo/kolo.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace kolo_test {

// A shape with `count` elements: 1-D for small counts, 2-D / 3-D for larger ones, so ndim varies.
inline std::vector<int64_t> ShapeFor(int64_t count) {
  if (count == 1000) return {10, 100};
  if (count == 70000) return {70, 10, 100};
  return {count};
}

inline std::string DtypeParamName(const ::testing::TestParamInfo<kolo_dtype_t>& info) {
  return DtypeName(info.param);
}

}  // namespace kolo_test

#endif  // KOLO_TESTS_MPI_COLLECTIVES_PARAMS_H_
