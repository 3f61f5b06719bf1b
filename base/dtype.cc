#include "base/dtype.h"

namespace kolo {

bool IsValidDataType(int value) { return value >= 0 && value < kNumDataTypes; }

bool IsValidReduceOp(int value) { return value >= 0 && value <= 5; }

size_t DataTypeSize(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8:
    case DataType::kInt8:
    case DataType::kBool:
      return 1;
    case DataType::kUInt16:
    case DataType::kInt16:
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
    case DataType::kInt32:
    case DataType::kFloat32:
      return 4;
    case DataType::kInt64:
    case DataType::kFloat64:
      return 8;
  }
  return 0;
}

std::string_view DataTypeName(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8: return "uint8";
    case DataType::kInt8: return "int8";
    case DataType::kUInt16: return "uint16";
    case DataType::kInt16: return "int16";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kFloat16: return "float16";
    case DataType::kFloat32: return "float32";
    case DataType::kFloat64: return "float64";
    case DataType::kBool: return "bool";
    case DataType::kBFloat16: return "bfloat16";
  }
  return "invalid-dtype";
}

std::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kAverage: return "average";
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAdasum: return "adasum";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kProduct: return "product";
  }
  return "invalid-op";
}

bool IsFloatingPoint(DataType dtype) {
  return dtype == DataType::kFloat16 || dtype == DataType::kBFloat16 ||
         dtype == DataType::kFloat32 || dtype == DataType::kFloat64;
}

bool IsHalf(DataType dtype) { return dtype == DataType::kFloat16 || dtype == DataType::kBFloat16; }

bool IsInteger(DataType dtype) { return !IsFloatingPoint(dtype) && dtype != DataType::kBool; }

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

bool ShapeBytes(const std::vector<int64_t>& shape, DataType dtype, int64_t* bytes) {
  int64_t n = static_cast<int64_t>(DataTypeSize(dtype));
  bool any_zero = false;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d == 0) any_zero = true;
  }
  if (any_zero) {
    *bytes = 0;
    return true;
  }
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) return false;
  }
  *bytes = n;
  return true;
}

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace kolo
