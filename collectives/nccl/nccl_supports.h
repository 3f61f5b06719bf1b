// What NCCL can reduce, known without NCCL's headers, so that the selector, the submission
// checks and the NCCL calls themselves agree, in builds with and without CUDA. NCCL reduces
// with ncclSum, ncclProd, ncclMin and ncclMax (kolo lowers Average to Sum and a division) over
// every dtype kolo has except int16, uint16 and bool, which NCCL has no type for.
#ifndef KOLO_COLLECTIVES_NCCL_NCCL_SUPPORTS_H_
#define KOLO_COLLECTIVES_NCCL_NCCL_SUPPORTS_H_

#include <string>

#include "base/dtype.h"

namespace kolo {

inline bool NcclHasDtype(DataType dtype) {
  return dtype != DataType::kInt16 && dtype != DataType::kUInt16 && dtype != DataType::kBool;
}

inline bool NcclHasReduceOp(ReduceOp op) {
  return op == ReduceOp::kSum || op == ReduceOp::kMin || op == ReduceOp::kMax ||
         op == ReduceOp::kProduct;
}

// "" when one NCCL call can reduce `dtype` with `op`, else why not ("NCCL has no int16").
inline std::string NcclSupports(DataType dtype, ReduceOp op) {
  if (!NcclHasReduceOp(op)) return "NCCL has no such reduction";
  if (!NcclHasDtype(dtype)) return "NCCL has no " + std::string(DataTypeName(dtype));
  return "";
}

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_NCCL_NCCL_SUPPORTS_H_
