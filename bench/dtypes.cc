#include "bench/dtypes.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

namespace kolo::bench {
namespace {

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

MPI_Datatype MpiType(kolo_dtype_t dtype) {
  switch (dtype) {
    case KOLO_UINT8:
      return MPI_UINT8_T;
    case KOLO_INT8:
      return MPI_INT8_T;
    case KOLO_UINT16:
      return MPI_UINT16_T;
    case KOLO_INT16:
      return MPI_INT16_T;
    case KOLO_INT32:
      return MPI_INT32_T;
    case KOLO_INT64:
      return MPI_INT64_T;
    case KOLO_FLOAT32:
      return MPI_FLOAT;
    case KOLO_FLOAT64:
      return MPI_DOUBLE;
    case KOLO_FLOAT16:
    case KOLO_BFLOAT16:
      return MPI_UINT16_T;  // with a user op, see MpiAllreducer
    default:
      return MPI_DATATYPE_NULL;
  }
}

MPI_Op MpiOp(kolo_reduce_op_t op) {
  switch (op) {
    case KOLO_OP_SUM:
    case KOLO_OP_AVERAGE:
      return MPI_SUM;
    case KOLO_OP_PRODUCT:
      return MPI_PROD;
    case KOLO_OP_MIN:
      return MPI_MIN;
    case KOLO_OP_MAX:
      return MPI_MAX;
    default:
      return MPI_OP_NULL;
  }
}

// Index into MpiAllreducer::half_ops_[.][op].
int HalfOpIndex(kolo_reduce_op_t op) {
  switch (op) {
    case KOLO_OP_PRODUCT:
      return 1;
    case KOLO_OP_MIN:
      return 2;
    case KOLO_OP_MAX:
      return 3;
    default:
      return 0;  // sum, avg
  }
}

// MPI_User_function for 16-bit floats: widen, reduce in float, round back once per pair.
template <bool kBfloat16, int kOp>
void HalfReduce(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = kBfloat16 ? Bfloat16ToFloat(a[i]) : HalfToFloat(a[i]);
    const float y = kBfloat16 ? Bfloat16ToFloat(b[i]) : HalfToFloat(b[i]);
    float r;
    if constexpr (kOp == 0) {
      r = x + y;
    } else if constexpr (kOp == 1) {
      r = x * y;
    } else if constexpr (kOp == 2) {
      r = std::fmin(x, y);
    } else {
      r = std::fmax(x, y);
    }
    b[i] = kBfloat16 ? FloatToBfloat16(r) : FloatToHalf(r);
  }
}

template <typename T>
void DivideInteger(void* data, int64_t count, int divisor) {
  T* p = static_cast<T*>(data);
  for (int64_t i = 0; i < count; ++i) p[i] = static_cast<T>(p[i] / divisor);
}

}  // namespace

const std::vector<DtypeInfo>& Dtypes() {
  static const std::vector<DtypeInfo> kDtypes = {
      {"int8", KOLO_INT8, 1, false, true},     {"uint8", KOLO_UINT8, 1, false, false},
      {"int16", KOLO_INT16, 2, false, true},   {"uint16", KOLO_UINT16, 2, false, false},
      {"int32", KOLO_INT32, 4, false, true},   {"int64", KOLO_INT64, 8, false, true},
      {"half", KOLO_FLOAT16, 2, true, true},   {"float", KOLO_FLOAT32, 4, true, true},
      {"double", KOLO_FLOAT64, 8, true, true}, {"bfloat16", KOLO_BFLOAT16, 2, true, true},
  };
  return kDtypes;
}

const std::vector<OpInfo>& Ops() {
  static const std::vector<OpInfo> kOps = {{"sum", KOLO_OP_SUM},
                                           {"prod", KOLO_OP_PRODUCT},
                                           {"max", KOLO_OP_MAX},
                                           {"min", KOLO_OP_MIN},
                                           {"avg", KOLO_OP_AVERAGE}};
  return kOps;
}

const DtypeInfo* ParseDtype(std::string_view name) {
  struct Alias {
    std::string_view alias, name;
  };
  static const Alias kAliases[] = {
      {"char", "int8"},      {"int", "int32"},    {"float32", "float"}, {"f32", "float"},
      {"fp32", "float"},     {"float16", "half"}, {"f16", "half"},      {"fp16", "half"},
      {"float64", "double"}, {"f64", "double"},   {"fp64", "double"},   {"bf16", "bfloat16"},
  };
  for (const Alias& a : kAliases) {
    if (a.alias == name) name = a.name;
  }
  for (const DtypeInfo& d : Dtypes()) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

const OpInfo* ParseOp(std::string_view name) {
  if (name == "product") name = "prod";
  if (name == "average" || name == "mean") name = "avg";
  for (const OpInfo& o : Ops()) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

std::string DtypeNameList() {
  std::string out;
  for (const DtypeInfo& d : Dtypes()) {
    if (!out.empty()) out += ", ";
    out += d.name;
  }
  return out;
}

// After F. Giesen's float_to_half_fast3_rtne (public domain).
uint16_t FloatToHalf(float value) {
  constexpr uint32_t kF32Infinity = 255u << 23;
  constexpr uint32_t kF16Max = (127u + 16u) << 23;  // first float that rounds to half infinity
  constexpr uint32_t kDenormMagic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint32_t u = FloatBits(value);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint16_t out;
  if (u >= kF16Max) {
    out = u > kF32Infinity ? 0x7e00 : 0x7c00;  // NaN stays NaN, too large becomes infinity
  } else if (u < (113u << 23)) {               // below half's smallest normal: let the FPU round
    out = static_cast<uint16_t>(FloatBits(BitsFloat(u) + BitsFloat(kDenormMagic)) - kDenormMagic);
  } else {
    const uint32_t mantissa_odd = (u >> 13) & 1u;
    u += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu;
    u += mantissa_odd;
    out = static_cast<uint16_t>(u >> 13);
  }
  return static_cast<uint16_t>(out | (sign >> 16));
}

float HalfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 31) return BitsFloat(sign | 0x7f800000u | (mantissa << 13));
  return BitsFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

uint16_t FloatToBfloat16(float value) {
  const uint32_t u = FloatBits(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float Bfloat16ToFloat(uint16_t bits) { return BitsFloat(static_cast<uint32_t>(bits) << 16); }

double LoadElement(const void* data, int64_t i, const DtypeInfo& dtype) {
  switch (dtype.kolo) {
    case KOLO_UINT8:
      return static_cast<const uint8_t*>(data)[i];
    case KOLO_INT8:
      return static_cast<const int8_t*>(data)[i];
    case KOLO_UINT16:
      return static_cast<const uint16_t*>(data)[i];
    case KOLO_INT16:
      return static_cast<const int16_t*>(data)[i];
    case KOLO_INT32:
      return static_cast<const int32_t*>(data)[i];
    case KOLO_INT64:
      return static_cast<double>(static_cast<const int64_t*>(data)[i]);
    case KOLO_FLOAT16:
      return HalfToFloat(static_cast<const uint16_t*>(data)[i]);
    case KOLO_BFLOAT16:
      return Bfloat16ToFloat(static_cast<const uint16_t*>(data)[i]);
    case KOLO_FLOAT32:
      return static_cast<const float*>(data)[i];
    case KOLO_FLOAT64:
      return static_cast<const double*>(data)[i];
    default:
      return std::nan("");
  }
}

void StoreElement(void* data, int64_t i, const DtypeInfo& dtype, double value) {
  // Integers go through int64 so that out-of-range values wrap like a C cast instead of being
  // undefined behaviour.
  const auto wide = static_cast<int64_t>(value);
  switch (dtype.kolo) {
    case KOLO_UINT8:
      static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(wide);
      break;
    case KOLO_INT8:
      static_cast<int8_t*>(data)[i] = static_cast<int8_t>(wide);
      break;
    case KOLO_UINT16:
      static_cast<uint16_t*>(data)[i] = static_cast<uint16_t>(wide);
      break;
    case KOLO_INT16:
      static_cast<int16_t*>(data)[i] = static_cast<int16_t>(wide);
      break;
    case KOLO_INT32:
      static_cast<int32_t*>(data)[i] = static_cast<int32_t>(wide);
      break;
    case KOLO_INT64:
      static_cast<int64_t*>(data)[i] = wide;
      break;
    case KOLO_FLOAT16:
      static_cast<uint16_t*>(data)[i] = FloatToHalf(static_cast<float>(value));
      break;
    case KOLO_BFLOAT16:
      static_cast<uint16_t*>(data)[i] = FloatToBfloat16(static_cast<float>(value));
      break;
    case KOLO_FLOAT32:
      static_cast<float*>(data)[i] = static_cast<float>(value);
      break;
    case KOLO_FLOAT64:
      static_cast<double*>(data)[i] = value;
      break;
    default:
      break;
  }
}

MpiAllreducer::MpiAllreducer(const World& world) : world_(world) {
  MPI_User_function* const kFunctions[2][4] = {
      {HalfReduce<false, 0>, HalfReduce<false, 1>, HalfReduce<false, 2>, HalfReduce<false, 3>},
      {HalfReduce<true, 0>, HalfReduce<true, 1>, HalfReduce<true, 2>, HalfReduce<true, 3>}};
  for (int kind = 0; kind < 2; ++kind) {
    for (int op = 0; op < 4; ++op) {
      CheckMpi(world_, MPI_Op_create(kFunctions[kind][op], /*commute=*/1, &half_ops_[kind][op]),
               "MPI_Op_create(16-bit float op)");
    }
  }
}

MpiAllreducer::~MpiAllreducer() {
  for (auto& kind : half_ops_) {
    for (MPI_Op& op : kind) MPI_Op_free(&op);
  }
}

void MpiAllreducer::Run(const void* input, void* output, int64_t count, const DtypeInfo& dtype,
                        const OpInfo& op) const {
  if (count > INT_MAX) {
    Fail(world_, "MPI_Allreduce: " + std::to_string(count) +
                     " elements exceed MPI's int count; use a smaller -e");
  }
  const MPI_Op mpi_op = OpFor(dtype, op);
  const void* send = input == output ? MPI_IN_PLACE : input;
  CheckMpi(world_,
           MPI_Allreduce(send, output, static_cast<int>(count), MpiType(dtype.kolo), mpi_op,
                         world_.comm),
           "MPI_Allreduce");
  if (op.kolo == KOLO_OP_AVERAGE) DivideByRanks(output, count, dtype);
}

void MpiAllreducer::ReduceScatter(const void* input, void* output, int64_t recv_count,
                                  const DtypeInfo& dtype, const OpInfo& op) const {
  if (recv_count > INT_MAX) {
    Fail(world_, "MPI_Reduce_scatter_block: " + std::to_string(recv_count) +
                     " elements exceed MPI's int count; use a smaller -e");
  }
  const void* send = input == output ? MPI_IN_PLACE : input;
  CheckMpi(world_,
           MPI_Reduce_scatter_block(send, output, static_cast<int>(recv_count), MpiType(dtype.kolo),
                                    OpFor(dtype, op), world_.comm),
           "MPI_Reduce_scatter_block");
  if (op.kolo == KOLO_OP_AVERAGE) DivideByRanks(output, recv_count, dtype);
}

MPI_Op MpiAllreducer::OpFor(const DtypeInfo& dtype, const OpInfo& op) const {
  const bool half = dtype.kolo == KOLO_FLOAT16 || dtype.kolo == KOLO_BFLOAT16;
  return half ? half_ops_[dtype.kolo == KOLO_BFLOAT16 ? 1 : 0][HalfOpIndex(op.kolo)]
              : MpiOp(op.kolo);
}

void MpiAllreducer::DivideByRanks(void* output, int64_t count, const DtypeInfo& dtype) const {
  const int n = world_.size;
  switch (dtype.kolo) {
    case KOLO_UINT8:
      DivideInteger<uint8_t>(output, count, n);
      break;
    case KOLO_INT8:
      DivideInteger<int8_t>(output, count, n);
      break;
    case KOLO_UINT16:
      DivideInteger<uint16_t>(output, count, n);
      break;
    case KOLO_INT16:
      DivideInteger<int16_t>(output, count, n);
      break;
    case KOLO_INT32:
      DivideInteger<int32_t>(output, count, n);
      break;
    case KOLO_INT64:
      DivideInteger<int64_t>(output, count, n);
      break;
    case KOLO_FLOAT32: {
      auto* p = static_cast<float*>(output);
      const float divisor = static_cast<float>(n);
      for (int64_t i = 0; i < count; ++i) p[i] /= divisor;
      break;
    }
    case KOLO_FLOAT64: {
      auto* p = static_cast<double*>(output);
      const double divisor = n;
      for (int64_t i = 0; i < count; ++i) p[i] /= divisor;
      break;
    }
    case KOLO_FLOAT16: {
      auto* p = static_cast<uint16_t*>(output);
      for (int64_t i = 0; i < count; ++i) p[i] = FloatToHalf(HalfToFloat(p[i]) / n);
      break;
    }
    case KOLO_BFLOAT16: {
      auto* p = static_cast<uint16_t*>(output);
      for (int64_t i = 0; i < count; ++i) p[i] = FloatToBfloat16(Bfloat16ToFloat(p[i]) / n);
      break;
    }
    default:
      break;
  }
}

}  // namespace kolo::bench
