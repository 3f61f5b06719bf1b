// The messages are built with fmt: each reads as the sentence it prints.
#include "runtime/validate.h"

#include <cmath>
#include <string>

#include "base/logging.h"  // fmt
#include "collectives/host/adasum_allreduce.h"

namespace kolo {
namespace {

// Adasum's coefficients need real numbers, and the tree it combines over a power-of-two
// number of ranks. Every rank refuses alike, at submission, so none waits for the others.
Status ValidateAdasum(const Submission& s, int size) {
  if (!IsFloatingPoint(s.dtype)) {
    return InvalidArgumentError(fmt::format(
        "Adasum needs a floating-point tensor (float16, bfloat16, float32 or float64), not {}",
        DataTypeName(s.dtype)));
  }
  return CheckAdasumRanks(size);
}

Status ValidateSplits(const Submission& s, int size) {
  const int64_t rows = s.shape[0];
  if (s.splits.empty()) {
    if (rows % size != 0) {
      return InvalidArgumentError(fmt::format(
          "first dimension {} is not divisible by {} ranks (give splits)", rows, size));
    }
    return Status::OK();
  }
  if (s.splits.size() != static_cast<size_t>(size)) {
    return InvalidArgumentError(fmt::format("{} splits for {} ranks", s.splits.size(), size));
  }
  int64_t sum = 0;
  for (int64_t v : s.splits) {
    if (v < 0 || __builtin_add_overflow(sum, v, &sum)) {
      return InvalidArgumentError(
          fmt::format("splits {} has a negative entry or overflows", ShapeString(s.splits)));
    }
  }
  if (sum != rows) {
    return InvalidArgumentError(fmt::format("splits {} sum to {}, not the first dimension {}",
                                            ShapeString(s.splits), sum, rows));
  }
  return Status::OK();
}

Status ValidateScaling(const Submission& s) {
  if (s.dtype == DataType::kBool && s.reduce_op == ReduceOp::kAverage) {
    return InvalidArgumentError("Average is not defined for bool");
  }
  if (!std::isfinite(s.prescale) || !std::isfinite(s.postscale)) {
    return InvalidArgumentError("scale factors must be finite");
  }
  if (s.dtype == DataType::kBool && (s.prescale != 1.0 || s.postscale != 1.0)) {
    return InvalidArgumentError("scale factors must be 1 for bool");
  }
  return Status::OK();
}

Status ValidateOperation(const Submission& s, int size) {
  switch (s.op) {
    case OpType::kAllreduce:
      if (s.reduce_op == ReduceOp::kAdasum) KOLO_RETURN_IF_ERROR(ValidateAdasum(s, size));
      return ValidateScaling(s);
    case OpType::kAllgather:
      if (s.shape.empty()) return InvalidArgumentError("allgather needs at least one dimension");
      return Status::OK();
    case OpType::kBroadcast:
      if (s.root < 0 || s.root >= size) {
        return InvalidArgumentError(
            fmt::format("root rank {} is outside [0, {})", s.root, size));
      }
      return Status::OK();
    case OpType::kReducescatter:
      if (s.shape.empty()) {
        return InvalidArgumentError("reducescatter needs at least one dimension");
      }
      if (s.reduce_op != ReduceOp::kSum && s.reduce_op != ReduceOp::kAverage) {
        return InvalidArgumentError(fmt::format(
            "reduce op {} is not supported (only sum and average)", ReduceOpName(s.reduce_op)));
      }
      return ValidateScaling(s);
    case OpType::kAlltoall:
      if (s.shape.empty()) return InvalidArgumentError("alltoall needs at least one dimension");
      return ValidateSplits(s, size);
    case OpType::kBarrier:
      if (!s.shape.empty() && NumElements(s.shape) != 0) {
        return InvalidArgumentError("a barrier carries no data");
      }
      return Status::OK();
    case OpType::kJoin:
      return Status::OK();
  }
  return Status::OK();
}

}  // namespace

Status ValidateSubmission(const Submission& s, int size) {
  for (int64_t d : s.shape) {
    if (d < 0) {
      return InvalidArgumentError(
          fmt::format("negative dimension in shape {}", ShapeString(s.shape)));
    }
  }
  int64_t bytes = 0;
  if (!ShapeBytes(s.shape, s.dtype, &bytes)) {
    return InvalidArgumentError(fmt::format("shape {} of {} is larger than 2^63-1 bytes",
                                            ShapeString(s.shape), DataTypeName(s.dtype)));
  }
  const bool barrier_name = s.name.rfind(kBarrierPrefix, 0) == 0;
  if (barrier_name != (s.op == OpType::kBarrier)) {
    return InvalidArgumentError(
        fmt::format("names starting with '{}' are reserved for barriers", kBarrierPrefix));
  }
  const bool join_name = s.name.rfind(kJoinPrefix, 0) == 0;
  if (join_name != (s.op == OpType::kJoin)) {
    return InvalidArgumentError(
        fmt::format("names starting with '{}' are reserved for join", kJoinPrefix));
  }
  const int64_t count = NumElements(s.shape);
  const bool kolo_allocates = s.op == OpType::kAllgather || s.op == OpType::kReducescatter ||
                              s.op == OpType::kAlltoall;
  if (count > 0 && !s.input) return InvalidArgumentError("input is NULL");
  if (count > 0 && !kolo_allocates && !s.output) return InvalidArgumentError("output is NULL");
  return ValidateOperation(s, size);
}

}  // namespace kolo
