#include "bench/check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace kolo::bench {
namespace {

constexpr int64_t kMaxModulus = 100;

// Largest L such that every whole number in [-L, L] (or [0, L] unsigned) is held exactly.
int64_t ExactLimit(kolo_dtype_t dtype) {
  switch (dtype) {
    case KOLO_INT8:
      return 127;
    case KOLO_UINT8:
      return 254;  // 255 is the poison pattern
    case KOLO_INT16:
      return 32767;
    case KOLO_UINT16:
      return 65534;
    case KOLO_INT32:
      return INT32_MAX;
    case KOLO_FLOAT16:
      return 2048;
    case KOLO_BFLOAT16:
      return 256;
    case KOLO_FLOAT32:
      return int64_t{1} << 24;
    default:
      return int64_t{1} << 53;  // int64 (through double), float64
  }
}

// Largest k such that 2^k is held exactly (and is not the poison pattern).
int MaxPowerOfTwo(kolo_dtype_t dtype) {
  switch (dtype) {
    case KOLO_INT8:
      return 6;
    case KOLO_UINT8:
      return 7;
    case KOLO_INT16:
      return 14;
    case KOLO_UINT16:
      return 15;
    case KOLO_INT32:
      return 30;
    case KOLO_INT64:
      return 52;
    case KOLO_FLOAT16:
      return 15;
    default:
      return 127;  // bfloat16, float32, float64
  }
}

uint64_t Hash(int64_t index) {
  return (static_cast<uint64_t>(index) * 0x9E3779B97F4A7C15ull) >> 40;
}

// +1,-1,+2,-2,+3,-3,+1,-1,... by rank pairs; 0 for an unpaired last rank.
int PairOffset(int rank, int nranks) {
  if (nranks % 2 == 1 && rank == nranks - 1) return 0;
  const int magnitude = (rank / 2) % 3 + 1;
  return rank % 2 == 0 ? magnitude : -magnitude;
}

// Rounds a value to what the dtype stores (integers wrap like a C cast).
double InDtype(const DtypeInfo& dtype, double value) {
  unsigned char scratch[8];
  StoreElement(scratch, 0, dtype, value);
  return LoadElement(scratch, 0, dtype);
}

}  // namespace

CheckPattern::CheckPattern(const DtypeInfo& dtype, const OpInfo& op, int nranks)
    : dtype_(dtype), op_(op), nranks_(std::max(1, nranks)) {
  const int64_t limit = ExactLimit(dtype.kolo);
  switch (op.kolo) {
    case KOLO_OP_SUM:
    case KOLO_OP_AVERAGE:
      // Every partial sum is at most n * (M - 1 + 3 + 3).
      modulus_ = std::min<int64_t>(kMaxModulus, limit / nranks_ - 5);
      if (modulus_ < 1) {
        modulus_ = 1;
        exact_ = static_cast<int64_t>(nranks_) * 6 <= limit;
      }
      break;
    case KOLO_OP_PRODUCT:
      max_twos_ = std::min(nranks_, MaxPowerOfTwo(dtype.kolo));
      break;
    default:  // min, max: values in [lo, lo + M)
      modulus_ = std::min<int64_t>(kMaxModulus + 1, dtype.floating ? 2 * 50 + 1 : limit);
      break;
  }
}

int64_t CheckPattern::A(int64_t index) const {
  return 3 + static_cast<int64_t>(Hash(index) % static_cast<uint64_t>(modulus_));
}

double CheckPattern::Input(int rank, int64_t index) const {
  switch (op_.kolo) {
    case KOLO_OP_SUM:
    case KOLO_OP_AVERAGE:
      return static_cast<double>(A(index) + PairOffset(rank, nranks_));
    case KOLO_OP_PRODUCT: {
      const uint64_t h = Hash(index);
      if (rank < max_twos_ && (h + rank) % 3 == 0) return 2.0;
      if (dtype_.floating && (h / 3 + 7 * static_cast<uint64_t>(rank)) % 5 == 1) return -1.0;
      return 1.0;
    }
    default: {
      const double lo = dtype_.floating ? -50.0 : 0.0;
      const uint64_t m = static_cast<uint64_t>(modulus_);
      return lo + static_cast<double>((Hash(index) + 37 * static_cast<uint64_t>(rank)) % m);
    }
  }
}

double CheckPattern::Expected(int64_t index) const {
  switch (op_.kolo) {
    case KOLO_OP_SUM:
      return InDtype(dtype_, static_cast<double>(nranks_) * static_cast<double>(A(index)));
    case KOLO_OP_AVERAGE: {
      const double sum = InDtype(dtype_, static_cast<double>(nranks_) * A(index));
      return InDtype(dtype_, dtype_.floating ? sum / nranks_ : std::trunc(sum / nranks_));
    }
    case KOLO_OP_PRODUCT: {
      double product = 1.0;
      for (int r = 0; r < nranks_; ++r) product *= Input(r, index);
      return InDtype(dtype_, product);
    }
    case KOLO_OP_MIN: {
      double best = Input(0, index);
      for (int r = 1; r < nranks_; ++r) best = std::min(best, Input(r, index));
      return best;
    }
    default: {
      double best = Input(0, index);
      for (int r = 1; r < nranks_; ++r) best = std::max(best, Input(r, index));
      return best;
    }
  }
}

void CheckPattern::Fill(void* data, int64_t count, int rank, int64_t first_index) const {
  for (int64_t k = 0; k < count; ++k) StoreElement(data, k, dtype_, Input(rank, first_index + k));
}

int64_t CheckPattern::CountWrong(const void* data, int64_t count, int64_t first_index,
                                 std::string* first_bad) const {
  int64_t wrong = 0;
  for (int64_t k = 0; k < count; ++k) {
    const double got = LoadElement(data, k, dtype_);
    const double want = Expected(first_index + k);
    if (got == want) continue;  // NaN (the poison) compares unequal
    if (wrong == 0 && first_bad != nullptr) {
      char text[160];
      std::snprintf(text, sizeof text, "element %lld: expected %.17g, got %.17g",
                    static_cast<long long>(first_index + k), want, got);
      *first_bad = text;
    }
    ++wrong;
  }
  return wrong;
}

}  // namespace kolo::bench
