// One builder of Runtime submissions for every unit test: the fields every operation has, then
// the operation's own set on the result (s.reduce_op = ..., s.splits = ..., s.device = ...).
#ifndef KOLO_TESTS_HARNESS_SUBMISSION_H_
#define KOLO_TESTS_HARNESS_SUBMISSION_H_

#include <string>
#include <utility>
#include <vector>

#include "runtime/runtime.h"

namespace kolo {
namespace testing {

// `op` of `name` reading `shape` elements of `dtype` from `in` into `out` (nullptr where kolo
// allocates the output: allgather, alltoall, reducescatter); Sum, host memory by detection.
inline Submission MakeSubmission(OpType op, std::string name, const void* in, void* out,
                                 DataType dtype, std::vector<int64_t> shape) {
  Submission s;
  s.op = op;
  s.name = std::move(name);
  s.input = in;
  s.output = out;
  s.dtype = dtype;
  s.shape = std::move(shape);
  return s;
}

}  // namespace testing
}  // namespace kolo

#endif  // KOLO_TESTS_HARNESS_SUBMISSION_H_
