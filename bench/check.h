// Inputs whose all-reduce is exact in every dtype, and the check of every output element against
// the reference computed locally from every rank's (known) inputs: kolo-bench's -c 1.
//
// Input of rank r at element index i (H(i) = a multiplicative hash of i, so a chunk that lands at
// the wrong offset is caught; e(r) = +1,-1,+2,-2,+3,-3,+1,... in rank pairs, 0 for the last rank
// when the count is odd, so that sum_r e(r) = 0 while every rank's data differs):
//
//   sum, avg   a(i) + e(r),  a(i) = 3 + H(i) mod M    -> sum n*a(i), avg a(i): whole numbers
//   prod       2 for a few (i, r) on the first T ranks, -1 for some (i, r) in floating dtypes,
//              else 1                                   -> a signed power of two, |.| <= 2^T
//   min, max   lo + (H(i) + 37 r) mod M, lo = -50 for floating dtypes, 0 for integers
//
// M and T are chosen from the number of ranks so that every partial result stays a whole number
// that the dtype holds exactly (half: 2048, bfloat16: 256, int8: 127, ...). Where no M >= 1 fits
// (e.g. sum over more than 42 ranks in bfloat16) exact() is false and the header says so.
// The integer patterns never produce the all-ones bit pattern that Poison() writes, and for
// floating dtypes that pattern is NaN, so an element the collective never wrote is counted wrong.
#ifndef KOLO_BENCH_CHECK_H_
#define KOLO_BENCH_CHECK_H_

#include <cstdint>
#include <string>

#include "bench/dtypes.h"

namespace kolo::bench {

class CheckPattern {
 public:
  CheckPattern(const DtypeInfo& dtype, const OpInfo& op, int nranks);

  double Input(int rank, int64_t index) const;
  double Expected(int64_t index) const;  // the reduction of Input(0..n-1, index), in the dtype

  // data[k] = Input(rank, first_index + k) for k in [0, count).
  void Fill(void* data, int64_t count, int rank, int64_t first_index) const;
  // How many of data[0..count) differ from Expected(first_index + k); the first such element is
  // described in *first_bad ("element 17: expected 12, got nan") when non-null.
  int64_t CountWrong(const void* data, int64_t count, int64_t first_index,
                     std::string* first_bad) const;

  bool exact() const { return exact_; }

 private:
  int64_t A(int64_t index) const;

  const DtypeInfo& dtype_;
  const OpInfo& op_;
  int nranks_;
  int64_t modulus_ = 1;  // M
  int max_twos_ = 0;     // T
  bool exact_ = true;
};

}  // namespace kolo::bench

#endif  // KOLO_BENCH_CHECK_H_
