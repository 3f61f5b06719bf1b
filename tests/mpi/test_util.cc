#include "test_util.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>

namespace kolo_test {

// ---- world --------------------------------------------------------------------------------------

int WorldRank() {
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int WorldSize() {
  int size = -1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

void WorldBarrier() { MPI_Barrier(MPI_COMM_WORLD); }

namespace {

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::atomic<double> g_test_deadline{1e300};

}  // namespace

void SetTestDeadlineFromNow(double seconds) { g_test_deadline.store(NowSeconds() + seconds); }

double SecondsToTestDeadline() { return g_test_deadline.load() - NowSeconds(); }

std::string CurrentTestName() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info == nullptr) return "no-test";
  return std::string(info->test_suite_name()) + "." + info->name();
}

std::string TensorName(const std::string& suffix) { return CurrentTestName() + "/" + suffix; }

// ---- dtypes -------------------------------------------------------------------------------------

std::vector<kolo_dtype_t> AllDtypes() {
  return {KOLO_UINT8,   KOLO_INT8,    KOLO_UINT16, KOLO_INT16, KOLO_INT32,   KOLO_INT64,
          KOLO_FLOAT16, KOLO_FLOAT32, KOLO_FLOAT64, KOLO_BOOL, KOLO_BFLOAT16};
}

std::vector<kolo_reduce_op_t> ReduceOps() {
  return {KOLO_OP_AVERAGE, KOLO_OP_SUM, KOLO_OP_MIN, KOLO_OP_MAX, KOLO_OP_PRODUCT};
}

const char* DtypeName(kolo_dtype_t dtype) {
  switch (dtype) {
    case KOLO_UINT8: return "uint8";
    case KOLO_INT8: return "int8";
    case KOLO_UINT16: return "uint16";
    case KOLO_INT16: return "int16";
    case KOLO_INT32: return "int32";
    case KOLO_INT64: return "int64";
    case KOLO_FLOAT16: return "float16";
    case KOLO_FLOAT32: return "float32";
    case KOLO_FLOAT64: return "float64";
    case KOLO_BOOL: return "bool";
    case KOLO_BFLOAT16: return "bfloat16";
  }
  return "unknown-dtype";
}

const char* ReduceOpName(kolo_reduce_op_t op) {
  switch (op) {
    case KOLO_OP_AVERAGE: return "average";
    case KOLO_OP_SUM: return "sum";
    case KOLO_OP_ADASUM: return "adasum";
    case KOLO_OP_MIN: return "min";
    case KOLO_OP_MAX: return "max";
    case KOLO_OP_PRODUCT: return "product";
  }
  return "unknown-op";
}

size_t DtypeBytes(kolo_dtype_t dtype) {
  switch (dtype) {
    case KOLO_UINT8:
    case KOLO_INT8:
    case KOLO_BOOL: return 1;
    case KOLO_UINT16:
    case KOLO_INT16:
    case KOLO_FLOAT16:
    case KOLO_BFLOAT16: return 2;
    case KOLO_INT32:
    case KOLO_FLOAT32: return 4;
    case KOLO_INT64:
    case KOLO_FLOAT64: return 8;
  }
  return 0;
}

bool IsFloat(kolo_dtype_t dtype) {
  return dtype == KOLO_FLOAT16 || dtype == KOLO_BFLOAT16 || dtype == KOLO_FLOAT32 ||
         dtype == KOLO_FLOAT64;
}

bool IsInteger(kolo_dtype_t dtype) { return !IsFloat(dtype) && dtype != KOLO_BOOL; }

bool IsSigned(kolo_dtype_t dtype) {
  return dtype == KOLO_INT8 || dtype == KOLO_INT16 || dtype == KOLO_INT32 || dtype == KOLO_INT64;
}

int IntegerBits(kolo_dtype_t dtype) { return static_cast<int>(DtypeBytes(dtype)) * 8; }

// ---- 16-bit float converters --------------------------------------------------------------------

uint32_t EncodeBinaryFloat(double value, int exp_bits, int mant_bits) {
  const uint32_t sign = std::signbit(value) ? (1u << (exp_bits + mant_bits)) : 0u;
  const uint32_t exp_all_ones = (1u << exp_bits) - 1;
  if (std::isnan(value)) return sign | (exp_all_ones << mant_bits) | (1u << (mant_bits - 1));
  const double a = std::fabs(value);
  if (std::isinf(a)) return sign | (exp_all_ones << mant_bits);
  if (a == 0.0) return sign;
  const int bias = (1 << (exp_bits - 1)) - 1;
  int e = 0;
  std::frexp(a, &e);          // a = f * 2^e, f in [0.5, 1): unbiased exponent is e - 1
  int biased = e - 1 + bias;  // exponent field if normal
  if (biased <= 0) {
    // Subnormal: a = m * 2^(1 - bias - mant_bits). The scaling is exact in double.
    const double q = std::ldexp(a, bias - 1 + mant_bits);
    const uint64_t m = static_cast<uint64_t>(std::nearbyint(q));  // ties to even (default mode)
    return sign | static_cast<uint32_t>(m);  // m == 2^mant_bits encodes the smallest normal
  }
  const double q = std::ldexp(a, mant_bits - (e - 1));  // in [2^mant_bits, 2^(mant_bits+1))
  uint64_t m = static_cast<uint64_t>(std::nearbyint(q));
  if (m == (uint64_t{2} << mant_bits)) {
    m >>= 1;
    ++biased;
  }
  if (biased >= static_cast<int>(exp_all_ones)) return sign | (exp_all_ones << mant_bits);
  return sign | (static_cast<uint32_t>(biased) << mant_bits) |
         static_cast<uint32_t>(m - (uint64_t{1} << mant_bits));
}

double DecodeBinaryFloat(uint32_t bits, int exp_bits, int mant_bits) {
  const bool negative = (bits >> (exp_bits + mant_bits)) & 1u;
  const uint32_t exp_all_ones = (1u << exp_bits) - 1;
  const uint32_t field = (bits >> mant_bits) & exp_all_ones;
  const uint32_t mant = bits & ((1u << mant_bits) - 1);
  const int bias = (1 << (exp_bits - 1)) - 1;
  double v;
  if (field == exp_all_ones) {
    v = mant ? std::nan("") : HUGE_VAL;
  } else if (field == 0) {
    v = std::ldexp(static_cast<double>(mant), 1 - bias - mant_bits);
  } else {
    v = std::ldexp(static_cast<double>(mant | (1u << mant_bits)),
                   static_cast<int>(field) - bias - mant_bits);
  }
  return negative ? -v : v;
}

uint16_t DoubleToHalf(double value) {
  return static_cast<uint16_t>(EncodeBinaryFloat(value, 5, 10));
}
double HalfToDouble(uint16_t bits) { return DecodeBinaryFloat(bits, 5, 10); }
uint16_t DoubleToBfloat16(double value) {
  return static_cast<uint16_t>(EncodeBinaryFloat(value, 8, 7));
}
double Bfloat16ToDouble(uint16_t bits) { return DecodeBinaryFloat(bits, 8, 7); }

// ---- typed buffers ------------------------------------------------------------------------------

TypedBuffer::TypedBuffer(kolo_dtype_t dtype_in, int64_t count_in)
    : dtype(dtype_in), count(count_in), bytes(static_cast<size_t>(count_in) * DtypeBytes(dtype_in)) {}

void TypedBuffer::FillSentinel() { std::fill(bytes.begin(), bytes.end(), 0xA5); }

namespace {

template <typename T>
T LoadAs(const void* data, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const unsigned char*>(data) + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void StoreAs(void* data, int64_t i, T v) {
  std::memcpy(static_cast<unsigned char*>(data) + i * sizeof(T), &v, sizeof(T));
}

}  // namespace

int64_t LoadInt(kolo_dtype_t dtype, const void* data, int64_t i) {
  switch (dtype) {
    case KOLO_UINT8:
    case KOLO_BOOL: return LoadAs<uint8_t>(data, i);
    case KOLO_INT8: return LoadAs<int8_t>(data, i);
    case KOLO_UINT16: return LoadAs<uint16_t>(data, i);
    case KOLO_INT16: return LoadAs<int16_t>(data, i);
    case KOLO_INT32: return LoadAs<int32_t>(data, i);
    case KOLO_INT64: return LoadAs<int64_t>(data, i);
    default: return static_cast<int64_t>(LoadFloat(dtype, data, i));
  }
}

void StoreInt(kolo_dtype_t dtype, void* data, int64_t i, int64_t value) {
  const uint64_t u = static_cast<uint64_t>(value);
  switch (dtype) {
    case KOLO_UINT8: StoreAs<uint8_t>(data, i, static_cast<uint8_t>(u)); return;
    case KOLO_BOOL: StoreAs<uint8_t>(data, i, value != 0 ? 1 : 0); return;
    case KOLO_INT8: StoreAs<uint8_t>(data, i, static_cast<uint8_t>(u)); return;
    case KOLO_UINT16:
    case KOLO_INT16: StoreAs<uint16_t>(data, i, static_cast<uint16_t>(u)); return;
    case KOLO_INT32: StoreAs<uint32_t>(data, i, static_cast<uint32_t>(u)); return;
    case KOLO_INT64: StoreAs<uint64_t>(data, i, u); return;
    default: StoreFloat(dtype, data, i, static_cast<double>(value)); return;
  }
}

double LoadFloat(kolo_dtype_t dtype, const void* data, int64_t i) {
  switch (dtype) {
    case KOLO_FLOAT16: return HalfToDouble(LoadAs<uint16_t>(data, i));
    case KOLO_BFLOAT16: return Bfloat16ToDouble(LoadAs<uint16_t>(data, i));
    case KOLO_FLOAT32: return LoadAs<float>(data, i);
    case KOLO_FLOAT64: return LoadAs<double>(data, i);
    default: return static_cast<double>(LoadInt(dtype, data, i));
  }
}

void StoreFloat(kolo_dtype_t dtype, void* data, int64_t i, double value) {
  switch (dtype) {
    case KOLO_FLOAT16: StoreAs<uint16_t>(data, i, DoubleToHalf(value)); return;
    case KOLO_BFLOAT16: StoreAs<uint16_t>(data, i, DoubleToBfloat16(value)); return;
    case KOLO_FLOAT32: StoreAs<float>(data, i, static_cast<float>(value)); return;
    case KOLO_FLOAT64: StoreAs<double>(data, i, value); return;
    default: StoreInt(dtype, data, i, static_cast<int64_t>(std::trunc(value))); return;
  }
}

std::string FormatElement(kolo_dtype_t dtype, const void* data, int64_t i) {
  char text[96];
  switch (dtype) {
    case KOLO_FLOAT16:
    case KOLO_BFLOAT16:
      std::snprintf(text, sizeof(text), "%.9g (bits 0x%04x)", LoadFloat(dtype, data, i),
                    static_cast<unsigned>(LoadAs<uint16_t>(data, i)));
      break;
    case KOLO_FLOAT32:
      std::snprintf(text, sizeof(text), "%.9g", LoadFloat(dtype, data, i));
      break;
    case KOLO_FLOAT64:
      std::snprintf(text, sizeof(text), "%.17g", LoadFloat(dtype, data, i));
      break;
    default:
      std::snprintf(text, sizeof(text), "%" PRId64, LoadInt(dtype, data, i));
      break;
  }
  return text;
}

// ---- rank-unique data ---------------------------------------------------------------------------

namespace {

uint64_t Mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

uint64_t Hash(uint64_t seed, int64_t i) { return Mix(Mix(seed ^ 0x5EEDULL) ^ static_cast<uint64_t>(i)); }

// Largest |k| for float data v = k / 4: sums over up to 4 ranks stay exact in the compute type.
int64_t FloatK(kolo_dtype_t dtype) {
  switch (dtype) {
    case KOLO_FLOAT16: return 2048;            // v in [-512, 512], exact in float16
    case KOLO_BFLOAT16: return 256;            // v in [-64, 64], exact in bfloat16
    case KOLO_FLOAT32: return int64_t{1} << 22;
    default: return int64_t{1} << 50;
  }
}

// Largest |v| (signed) or v (unsigned) of kSmall integer data: the sum over the ranks times a
// scale of 4 still fits the dtype, and stays exact in double.
int64_t SmallIntBound(kolo_dtype_t dtype, int size) {
  const int bits = IntegerBits(dtype);
  const uint64_t max_value = IsSigned(dtype) ? (uint64_t{1} << (bits - 1)) - 1  // bits <= 64
                                             : (uint64_t{1} << bits) - 1;     // bits <= 16
  const int64_t bound = static_cast<int64_t>(max_value / (4 * static_cast<uint64_t>(std::max(size, 4))));
  return std::min<int64_t>(bound, int64_t{1} << 40);
}

}  // namespace

DataKind KindFor(kolo_dtype_t dtype, kolo_reduce_op_t op, bool scaled) {
  if (IsInteger(dtype)) {
    return (op == KOLO_OP_AVERAGE || scaled) ? DataKind::kSmall : DataKind::kWide;
  }
  if (IsFloat(dtype) && op == KOLO_OP_PRODUCT) return DataKind::kProduct;
  return DataKind::kWide;
}

TypedBuffer RankUniqueData(kolo_dtype_t dtype, int64_t count, int rank, DataKind kind,
                           uint64_t seed) {
  const int size = std::max(WorldSize(), 1);
  TypedBuffer buf(dtype, count);
  void* p = buf.data();
  const uint64_t r = static_cast<uint64_t>(rank);
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t h = Hash(seed * 1000003ULL + static_cast<uint64_t>(dtype), i);
    if (dtype == KOLO_BOOL) {
      // Indices cycle: all ranks true, all ranks false, then per-rank random bits twice.
      const int64_t phase = i % 4;
      const int64_t bit = phase == 0 ? 1 : phase == 1 ? 0 : static_cast<int64_t>((h >> (rank % 61)) & 1u);
      StoreInt(dtype, p, i, bit);
    } else if (IsInteger(dtype)) {
      if (kind == DataKind::kSmall) {
        const int64_t bound = SmallIntBound(dtype, size);
        // Values lo + m*size + rank: distinct across ranks at every index.
        const int64_t lo = IsSigned(dtype) ? -bound : 0;
        const int64_t span = IsSigned(dtype) ? 2 * bound + 1 : bound + 1;
        const int64_t slots = std::max<int64_t>(span / size, 1);
        const int64_t m = static_cast<int64_t>(h % static_cast<uint64_t>(slots));
        StoreInt(dtype, p, i, lo + m * size + rank);
      } else {
        // Full range; the XOR with an odd multiple of the rank keeps ranks distinct in the low
        // bits of every width.
        StoreInt(dtype, p, i, static_cast<int64_t>(h ^ (r * 0x9E3779B97F4A7C15ULL)));
      }
    } else {
      if (kind == DataKind::kProduct) {
        const int64_t c = 1 + static_cast<int64_t>(((h % 7) + r) % 7);  // 1..7, distinct per rank
        const int e = static_cast<int>((h >> 20) % 3);                // 2^0, 2^-1, 2^-2
        const bool negative = (((h >> 30) ^ r) & 1u) != 0;
        const double v = std::ldexp(static_cast<double>(c), -e);
        StoreFloat(dtype, p, i, negative ? -v : v);
      } else {
        const int64_t k_max = FloatK(dtype);
        const int64_t span = 2 * k_max + 1;
        const int64_t slots = std::max<int64_t>(span / size, 1);
        const int64_t m = static_cast<int64_t>(h % static_cast<uint64_t>(slots));
        const int64_t k = -k_max + m * size + rank;
        StoreFloat(dtype, p, i, static_cast<double>(k) * 0.25);
      }
    }
  }
  return buf;
}

std::vector<TypedBuffer> AllRanksData(kolo_dtype_t dtype, int64_t count, int size, DataKind kind,
                                      uint64_t seed) {
  std::vector<TypedBuffer> inputs;
  inputs.reserve(size);
  for (int r = 0; r < size; ++r) inputs.push_back(RankUniqueData(dtype, count, r, kind, seed));
  return inputs;
}

// ---- handles ------------------------------------------------------------------------------------

Handle::~Handle() { Reset(); }

Handle::Handle(Handle&& other) noexcept : h_(other.h_), abandoned_(other.abandoned_) {
  other.h_ = nullptr;
  other.abandoned_ = false;
}

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    Reset();
    h_ = other.h_;
    abandoned_ = other.abandoned_;
    other.h_ = nullptr;
    other.abandoned_ = false;
  }
  return *this;
}

void Handle::Reset() {
  if (h_ != nullptr && !abandoned_) {
    kolo_wait(h_);
    kolo_handle_free(h_);
  }
  h_ = nullptr;
  abandoned_ = false;
}

kolo_status_t WaitHandle(Handle& handle, const std::string& what) {
  if (!handle) {
    ADD_FAILURE() << "rank " << WorldRank() << ": WaitHandle(" << what << ") on an empty handle";
    return KOLO_ERR_INTERNAL;
  }
  const auto start = std::chrono::steady_clock::now();
  while (!kolo_poll(handle.get())) {
    if (SecondsToTestDeadline() <= 0) {
      const double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      ADD_FAILURE() << "rank " << WorldRank() << ": '" << what << "' still not complete after "
                    << waited << " s (test deadline reached); abandoning the handle";
      handle.Abandon();
      return KOLO_ERR_DEADLINE_EXCEEDED;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  const kolo_status_t status = kolo_wait(handle.get());
  EXPECT_EQ(kolo_handle_status(handle.get()), status)
      << "rank " << WorldRank() << ": kolo_handle_status disagrees with kolo_wait for " << what;
  return status;
}

namespace {
const int64_t* ShapePtr(const std::vector<int64_t>& shape) {
  static const int64_t kScalarShape[1] = {1};
  return shape.empty() ? kScalarShape : shape.data();
}
}  // namespace

kolo_status_t SubmitAllreduce(const std::string& name, TypedBuffer& input, TypedBuffer* output,
                              const std::vector<int64_t>& shape, kolo_reduce_op_t op,
                              Handle& handle, double prescale, double postscale) {
  void* out = output ? output->data() : input.data();
  return kolo_allreduce_async(name.c_str(), input.data(), out, input.dtype,
                              static_cast<int>(shape.size()), ShapePtr(shape), op, prescale,
                              postscale, handle.out());
}

kolo_status_t SubmitBroadcast(const std::string& name, TypedBuffer& input, TypedBuffer* output,
                              const std::vector<int64_t>& shape, int root, Handle& handle) {
  void* out = output ? output->data() : input.data();
  return kolo_broadcast_async(name.c_str(), input.data(), out, input.dtype,
                              static_cast<int>(shape.size()), ShapePtr(shape), root, handle.out());
}

kolo_status_t SubmitAllgather(const std::string& name, const TypedBuffer& input,
                              const std::vector<int64_t>& shape, Handle& handle) {
  return kolo_allgather_async(name.c_str(), input.data(), input.dtype,
                              static_cast<int>(shape.size()), ShapePtr(shape), handle.out());
}

std::string LastError() {
  const char* e = kolo_last_error();
  return e ? e : "(null)";
}

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string FormatShape(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace kolo_test
