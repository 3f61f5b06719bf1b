// Element types and reduction operations shared by every layer. Values are Horovod's numbers,
// identical to the C API's kolo_dtype_t / kolo_reduce_op_t, so casts between them are free.
#ifndef KOLO_BASE_DTYPE_H_
#define KOLO_BASE_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kolo {

enum class DataType : uint8_t {
  kUInt8 = 0,
  kInt8 = 1,
  kUInt16 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBool = 9,
  kBFloat16 = 10,
};
inline constexpr int kNumDataTypes = 11;

enum class ReduceOp : uint8_t {
  kAverage = 0,
  kSum = 1,
  kAdasum = 2,
  kMin = 3,
  kMax = 4,
  kProduct = 5,
};

bool IsValidDataType(int value);
bool IsValidReduceOp(int value);

// Bytes per element; 0 for an invalid value.
size_t DataTypeSize(DataType dtype);
// "float32", "bfloat16", ...
std::string_view DataTypeName(DataType dtype);
// "sum", "average", ...
std::string_view ReduceOpName(ReduceOp op);

bool IsFloatingPoint(DataType dtype);
bool IsHalf(DataType dtype);  // float16 or bfloat16
bool IsInteger(DataType dtype);  // signed or unsigned integers, not bool

// "[3,4]"
std::string ShapeString(const std::vector<int64_t>& shape);
// Product of the extents (1 for a scalar, 0 if any extent is 0). Only for shapes that passed
// ShapeBytes.
int64_t NumElements(const std::vector<int64_t>& shape);
// *bytes = elements x DataTypeSize(dtype); false when an extent is negative or the element or
// byte count does not fit in int64 (such a shape describes no buffer that can exist).
bool ShapeBytes(const std::vector<int64_t>& shape, DataType dtype, int64_t* bytes);

}  // namespace kolo

#endif  // KOLO_BASE_DTYPE_H_
