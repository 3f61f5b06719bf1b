// Whether a submission can run, decided before it is queued: pure functions of the Submission
// and the number of ranks (no runtime state, no memory probing), so each rule is unit-tested on
// its own (tests/unit/validate_test.cc). Runtime::Enqueue and EnqueueGroup call them once per
// tensor; the bindings only convert their types into a Submission.
//
// A refusal's message is the reason alone, without the "<op> '<name>'" label (OpLabel): the
// caller prefixes the label for its own caller, and announces the bare reason to the peers
// (Request::refused), whose submissions of the name then fail with "rank r refused it: reason".
#ifndef KOLO_RUNTIME_VALIDATE_H_
#define KOLO_RUNTIME_VALIDATE_H_

#include "base/status.h"
#include "runtime/runtime.h"

namespace kolo {

// Every rule below, in order; OK when the submission can be queued. `s.name` must not be empty
// (a nameless submission cannot be announced; the caller refuses it first).
//  - shape: no negative dimension, at most 2^63-1 bytes;
//  - names: "__kolo_barrier." only for barriers, "__kolo_join." only for join;
//  - buffers: an input when there are elements, an output too unless kolo allocates it
//    (allgather, reducescatter, alltoall);
//  - per operation: allreduce (Adasum: a floating dtype and a number of ranks Adasum's tree can
//    combine), allgather (one dimension at least), broadcast (root in [0, size)), reducescatter
//    (one dimension; Sum or Average), alltoall (one dimension; splits: one per rank, none
//    negative, summing to the first dimension; without splits the first dimension divides by
//    `size`), barrier (no data);
//  - reductions' scale factors (allreduce, reducescatter): no Average of bool, finite factors,
//    factors of 1 for bool.
Status ValidateSubmission(const Submission& s, int size);

}  // namespace kolo

#endif  // KOLO_RUNTIME_VALIDATE_H_
