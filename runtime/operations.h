// Submission checks and helpers of the operations beyond allreduce/allgather/broadcast:
// reducescatter, alltoall and barrier (their Execute functions are in operations.cc too).
#ifndef KOLO_RUNTIME_OPERATIONS_H_
#define KOLO_RUNTIME_OPERATIONS_H_

#include <cstdint>
#include <vector>

#include "runtime/runtime.h"

namespace kolo {

// The op-specific submission checks of reducescatter, alltoall and barrier (the common ones,
// name, shape and buffers, are done by the caller).
Status ValidateOperation(const Submission& s, int size);

// Rows of a first dimension of `rows` that rank `rank` of `size` receives from a reducescatter:
// Horovod's rule, rows / size each, and the first rows % size ranks one more.
int64_t ReducescatterShare(int64_t rows, int rank, int size);

// An alltoall's splits with the empty "equal split" filled in (call after a successful
// ValidateOperation).
std::vector<int64_t> ResolvedSplits(const Submission& s, int size);

}  // namespace kolo

#endif  // KOLO_RUNTIME_OPERATIONS_H_
