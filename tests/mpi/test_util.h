// Shared helpers of the tier-2 MPI suites (tests/mpi): rank-unique data, references computed
// locally from every rank's known inputs (never with kolo), a matcher that reports the first bad
// index, and small wrappers around the C API's handles.
//
// The data generators are deterministic functions of (dtype, kind, seed, index, rank), so every
// rank can rebuild every other rank's input and compute the exact expected result by itself.
#ifndef KOLO_TESTS_MPI_TEST_UTIL_H_
#define KOLO_TESTS_MPI_TEST_UTIL_H_

#include <kolo/kolo.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kolo_test {

// ---- world --------------------------------------------------------------------------------------

// MPI_COMM_WORLD rank and size (from MPI, not from kolo).
int WorldRank();
int WorldSize();
// MPI_Barrier(MPI_COMM_WORLD).
void WorldBarrier();

// The per-test deadline the main's listener sets at the start of every test (now + 60 s by
// default, KOLO_TEST_WAIT_S overrides); WaitHandle gives up at this point instead of hanging.
void SetTestDeadlineFromNow(double seconds);
double SecondsToTestDeadline();

// "Suite.Test" (with parameter suffixes) of the running test, for unique tensor names.
std::string CurrentTestName();
// CurrentTestName() + "/" + suffix: a tensor name unique to this test.
std::string TensorName(const std::string& suffix);

// ---- dtypes -------------------------------------------------------------------------------------

std::vector<kolo_dtype_t> AllDtypes();  // the 11 of kolo.h
std::vector<kolo_reduce_op_t> ReduceOps();  // Average, Sum, Min, Max, Product
const char* DtypeName(kolo_dtype_t dtype);  // "float32", "int8", "bool", ...
const char* ReduceOpName(kolo_reduce_op_t op);  // "average", "sum", ...
size_t DtypeBytes(kolo_dtype_t dtype);  // the test's own table, not kolo_dtype_size
bool IsFloat(kolo_dtype_t dtype);       // float16, bfloat16, float32, float64
bool IsInteger(kolo_dtype_t dtype);     // the six integer types
bool IsSigned(kolo_dtype_t dtype);      // signed integers
int IntegerBits(kolo_dtype_t dtype);

// ---- 16-bit float converters (the test's own; round to nearest, ties to even, once) -------------

uint16_t DoubleToHalf(double value);
double HalfToDouble(uint16_t bits);
uint16_t DoubleToBfloat16(double value);
double Bfloat16ToDouble(uint16_t bits);
// Generic IEEE-style encoder/decoder: `exp_bits` exponent bits, `mant_bits` stored mantissa bits,
// round to nearest even from a double, with subnormals, overflow to infinity and NaN.
uint32_t EncodeBinaryFloat(double value, int exp_bits, int mant_bits);
double DecodeBinaryFloat(uint32_t bits, int exp_bits, int mant_bits);

// ---- typed buffers ------------------------------------------------------------------------------

struct TypedBuffer {
  kolo_dtype_t dtype = KOLO_FLOAT32;
  int64_t count = 0;
  std::vector<unsigned char> bytes;

  TypedBuffer() = default;
  TypedBuffer(kolo_dtype_t dtype, int64_t count);
  // Never nullptr (a zero-element buffer still has a valid address).
  void* data() { return bytes.empty() ? static_cast<void*>(&dummy_) : bytes.data(); }
  const void* data() const {
    return bytes.empty() ? static_cast<const void*>(&dummy_) : bytes.data();
  }
  size_t nbytes() const { return bytes.size(); }
  // Fills every byte with a recognisable sentinel (0xA5), to detect writes.
  void FillSentinel();

 private:
  uint64_t dummy_ = 0;
};

// Element access. Integers: sign- or zero-extended; StoreInt wraps modulo 2^bits.
// Floats: as double; StoreFloat rounds to the dtype once (nearest even). Bool: 0 or 1.
int64_t LoadInt(kolo_dtype_t dtype, const void* data, int64_t i);
void StoreInt(kolo_dtype_t dtype, void* data, int64_t i, int64_t value);
double LoadFloat(kolo_dtype_t dtype, const void* data, int64_t i);
void StoreFloat(kolo_dtype_t dtype, void* data, int64_t i, double value);
// Any dtype as text, for messages.
std::string FormatElement(kolo_dtype_t dtype, const void* data, int64_t i);

// ---- rank-unique data ---------------------------------------------------------------------------

// What the data must allow exactly:
//  kWide: integers over the full range (Sum and Product wrap, Min/Max see both extremes); floats
//         as dyadic values whose sums over up to 4 ranks are exact in float32 (float64 for
//         float64) but need rounding in float16/bfloat16.
//  kSmall: integers with |v| <= max / (4 * max(size, 4)), so the sum over the ranks still fits
//          after a scale factor of up to 4 (Average and scale factors; signed data is negative
//          half the time, so truncation toward zero shows); floats as kWide.
//  kProduct: floats with 3 significant bits and exponents in [-2, 0], so a product over up to
//            4 ranks is exact in float32; integers as kWide.
enum class DataKind { kWide, kSmall, kProduct };
DataKind KindFor(kolo_dtype_t dtype, kolo_reduce_op_t op, bool scaled);

// v[i] = f(i, rank): at a given index no two ranks hold the same value (bool excepted: its
// indices cycle through all-true, all-false and per-rank random bits). `seed` separates tensors.
TypedBuffer RankUniqueData(kolo_dtype_t dtype, int64_t count, int rank, DataKind kind,
                           uint64_t seed = 0);

// ---- references (computed locally, never with kolo) ---------------------------------------------

struct Reference {
  TypedBuffer expected;
  // Absolute tolerance per element for float dtypes; empty means an exact match is required.
  std::vector<double> tolerance;
};

// The all-reduce of `inputs` (one buffer per rank, rank order): integers with wrap-around in the
// dtype, Average truncating toward zero, scale factors applied in double and truncated; bool
// OR/AND; floats summed in double (exact for the generated data), rounded once to the dtype.
// Results that cannot be exact in the dtype (a division by a non-power-of-two rank count,
// non-dyadic scale factors) get a tolerance of a few units in the last place.
Reference AllreduceReference(const std::vector<TypedBuffer>& inputs, kolo_reduce_op_t op,
                             double prescale = 1.0, double postscale = 1.0);

// Every rank's input for an all-reduce with the given data (rebuilt locally).
std::vector<TypedBuffer> AllRanksData(kolo_dtype_t dtype, int64_t count, int size, DataKind kind,
                                      uint64_t seed = 0);

// ---- matching -----------------------------------------------------------------------------------

// Compares `actual` (reference.expected.count elements of its dtype) with the reference:
// on failure the message gives the first bad index, expected, actual, and how many are wrong.
::testing::AssertionResult MatchesReference(const char* actual_expr, const char* reference_expr,
                                            const void* actual, const Reference& reference);
// Byte-for-byte equality of two buffers (for "input untouched" and broadcast / allgather).
::testing::AssertionResult BuffersEqual(const char* actual_expr, const char* expected_expr,
                                        const TypedBuffer& actual, const TypedBuffer& expected);
::testing::AssertionResult BytesEqual(const void* actual, const TypedBuffer& expected);

#define EXPECT_MATCHES_REFERENCE(actual_ptr, reference) \
  EXPECT_PRED_FORMAT2(::kolo_test::MatchesReference, actual_ptr, reference)
#define EXPECT_BUFFERS_EQUAL(actual, expected) \
  EXPECT_PRED_FORMAT2(::kolo_test::BuffersEqual, actual, expected)

// ---- handles ------------------------------------------------------------------------------------

// Owns a kolo_handle_t. The destructor waits for completion first (so buffers that outlive the
// wrapper are never written after it), unless WaitHandle already gave up on it.
class Handle {
 public:
  Handle() = default;
  ~Handle();
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept;
  Handle& operator=(Handle&& other) noexcept;

  kolo_handle_t* out() { return &h_; }  // for the *_async functions
  kolo_handle_t get() const { return h_; }
  explicit operator bool() const { return h_ != nullptr; }
  void Reset();
  void Abandon() { abandoned_ = true; }

 private:
  kolo_handle_t h_ = nullptr;
  bool abandoned_ = false;
};

// Waits for `handle` by polling kolo_poll until the per-test deadline, then returns kolo_wait's
// status. On timeout: a test failure naming the rank and `what`, the handle is abandoned (leaked,
// never waited again) and KOLO_ERR_DEADLINE_EXCEEDED is returned.
kolo_status_t WaitHandle(Handle& handle, const std::string& what);

// Thin wrappers over the *_async functions taking a std::vector shape (ndim = shape.size(); a
// valid shape pointer even for ndim 0). `output` nullptr selects the in-place variant.
kolo_status_t SubmitAllreduce(const std::string& name, TypedBuffer& input, TypedBuffer* output,
                              const std::vector<int64_t>& shape, kolo_reduce_op_t op,
                              Handle& handle, double prescale = 1.0, double postscale = 1.0);
kolo_status_t SubmitBroadcast(const std::string& name, TypedBuffer& input, TypedBuffer* output,
                              const std::vector<int64_t>& shape, int root, Handle& handle);
kolo_status_t SubmitAllgather(const std::string& name, const TypedBuffer& input,
                              const std::vector<int64_t>& shape, Handle& handle);

// kolo_last_error() as a std::string (for failure messages).
std::string LastError();

// Shape helpers.
int64_t NumElements(const std::vector<int64_t>& shape);
std::string FormatShape(const std::vector<int64_t>& shape);  // "[3,4]"

// Lower-cased copy.
std::string Lower(std::string s);

}  // namespace kolo_test

#endif  // KOLO_TESTS_MPI_TEST_UTIL_H_
