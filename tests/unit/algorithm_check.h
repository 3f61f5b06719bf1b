// Runs an AllreduceAlgorithm on rank-unique inputs of every dtype x op x count and compares
// each rank's output with a reference computed locally from every rank's known inputs
// (typed_data.h; never with kolo's kernels). Shared by the thread-world suite
// (allreduce_algorithms_test.cc) and the same cases under mpirun (tests/mpi/algorithms_main.cc),
// so both tiers check the same thing. Failures come back as text naming the case, the first
// bad index, expected and actual, and how many elements are wrong.
#ifndef KOLO_TESTS_UNIT_ALGORITHM_CHECK_H_
#define KOLO_TESTS_UNIT_ALGORITHM_CHECK_H_

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/algorithm.h"
#include "collectives/host/allgatherv.h"
#include "collectives/reduce.h"
#include "unit/typed_data.h"

namespace kolo::testing {

inline std::vector<DataType> AllAlgorithmDtypes() {
  return {DataType::kUInt8,   DataType::kInt8,    DataType::kUInt16, DataType::kInt16,
          DataType::kInt32,   DataType::kInt64,   DataType::kFloat16, DataType::kBFloat16,
          DataType::kFloat32, DataType::kFloat64, DataType::kBool};
}

inline std::vector<ReduceOp> KernelOps() {
  return {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct};
}

// The counts: empty, one, odd small, around block sizes, 2^20, and one not divisible
// by the rank count.
inline std::vector<size_t> AlgorithmCounts(int ranks, bool with_large) {
  std::vector<size_t> c = {0, 1, 7, 1023, 4097, static_cast<size_t>(ranks) * 37 + 1};
  if (with_large) c.push_back(size_t{1} << 20);
  return c;
}

struct CaseResult {
  bool ran = false;          // false: the algorithm declined (Supports) and said why
  std::string failure;       // empty: passed
  std::string declined_why;  // Supports() message when !ran
};

inline std::string CaseName(std::string_view algo, DataType t, ReduceOp op, size_t count,
                            bool in_place, int ranks) {
  return std::string(algo) + " " + std::string(DataTypeName(t)) + " " +
         std::string(ReduceOpName(op)) + " count=" + std::to_string(count) +
         (in_place ? " in-place" : " out-of-place") + " ranks=" + std::to_string(ranks);
}

// One case on this rank. Every rank must call it with the same arguments.
inline CaseResult CheckAllreduceCase(Communicator& comm, AllreduceAlgorithm& algo, DataType t,
                                     ReduceOp op, size_t count, bool in_place) {
  CaseResult res;
  const int ranks = comm.Size();
  const std::string name = CaseName(algo.Name(), t, op, count, in_place, ranks);
  SelectionInput in = DescribeCommunicator(comm);
  CostModel cost;
  in.cost = &cost;
  in.count = count;
  in.dtype = t;
  in.op = op;
  in.bytes = count * DataTypeSize(t);
  Status supported = algo.Supports(in);
  if (!supported.ok()) {
    res.declined_why = supported.message();
    return res;
  }
  res.ran = true;
  std::vector<char> input = Buffer(t, count), output = Buffer(t, count);
  for (size_t i = 0; i < count; ++i) Store(t, input.data(), i, Value(t, op, comm.Rank(), i));
  const std::vector<char> input_copy = input;
  std::memset(output.data(), 0x5a, output.size());
  AllreduceArgs args;
  args.send = input.data();
  args.recv = in_place ? input.data() : output.data();
  args.count = count;
  args.dtype = t;
  args.op = op;
  Status s = algo.Run(comm, args);
  if (!s.ok()) {
    res.failure = name + ": " + s.ToString();
    return res;
  }
  const char* result = in_place ? input.data() : output.data();
  if (!in_place && input != input_copy) {
    res.failure = name + ": the send buffer was modified";
    return res;
  }
  size_t wrong = 0, first = 0;
  double first_want = 0, first_got = 0;
  for (size_t i = 0; i < count; ++i) {
    alignas(8) char cell[8];  // the reference rounded into the dtype
    Store(t, cell, 0, Reference(t, op, ranks, i));
    const double want = Load(t, cell, 0);
    const double got = Load(t, result, i);
    if (!(got == want)) {
      if (wrong++ == 0) {
        first = i;
        first_want = want;
        first_got = got;
      }
    }
  }
  // The byte past the end must be untouched (out of place) — a write past count shows here.
  if (!in_place && static_cast<unsigned char>(output.back()) != 0x5a) {
    res.failure = name + ": wrote past the end of the output";
  } else if (wrong) {
    res.failure = name + " on rank " + std::to_string(comm.Rank()) + ": " +
                  std::to_string(wrong) + " of " + std::to_string(count) +
                  " elements wrong, first at " + std::to_string(first) + ": expected " +
                  std::to_string(first_want) + ", got " + std::to_string(first_got);
  }
  return res;
}

// Rank `rank`'s element i of random data: splitmix64 of (rank, i) -> [-1, 1), 24 significant
// bits (exact in float32).
inline double RandomUnit(int rank, size_t i) {
  uint64_t z = (static_cast<uint64_t>(rank) << 40) + i + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 40) / double(1 << 23) - 1.0;
}

// float32 sums of random data: close to the float64 reference, and bitwise the same on every
// rank (replicas of a model must not drift apart). Returns "" or the failure.
inline std::string CheckRandomFloat32Sum(Communicator& comm, AllreduceAlgorithm& algo,
                                         size_t count) {
  SelectionInput in = DescribeCommunicator(comm);
  CostModel cost;
  in.cost = &cost;
  in.count = count;
  in.bytes = count * 4;
  if (!algo.Supports(in).ok()) return "";
  auto value = [](int rank, size_t i) { return static_cast<float>(RandomUnit(rank, i)); };
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = value(comm.Rank(), i);
  AllreduceArgs args{data.data(), data.data(), count, DataType::kFloat32, ReduceOp::kSum};
  Status s = algo.Run(comm, args);
  const std::string name = std::string(algo.Name()) + " random float32 sum count=" +
                           std::to_string(count) + " ranks=" + std::to_string(comm.Size());
  if (!s.ok()) return name + ": " + s.ToString();
  for (size_t i = 0; i < count; ++i) {
    double want = 0;
    for (int r = 0; r < comm.Size(); ++r) want += value(r, i);
    if (std::fabs(data[i] - want) > 1e-5 * comm.Size()) {
      return name + ": element " + std::to_string(i) + " is " + std::to_string(data[i]) +
             ", float64 reference " + std::to_string(want);
    }
  }
  // Every rank's result, gathered, must be identical to rank 0's.
  std::vector<size_t> bytes(comm.Size(), count * 4);
  std::vector<float> all(count * comm.Size());
  s = comm.Allgatherv(data.data(), count * 4, all.data(), bytes);
  // A transport without a native all-gather (UCX) gathers with kolo's ring over its own
  // point-to-point.
  if (s.code() == StatusCode::kUnimplemented) {
    s = RingAllgatherv(comm, data.data(), count * 4, all.data(), bytes);
  }
  if (!s.ok()) return name + ": gathering results: " + s.ToString();
  for (int r = 1; r < comm.Size(); ++r) {
    if (std::memcmp(all.data(), all.data() + r * count, count * 4) != 0) {
      return name + ": rank " + std::to_string(r) + "'s result differs from rank 0's in bits";
    }
  }
  return "";
}

// RunScaled's contract, for one dtype (float32 or float64), count and factor: where the
// algorithm offers it (CanRunScaled), the bits of Run and then ScaleCopy by the same factor, on
// every rank, in place or out of place; elsewhere a factor other than 1 is refused with
// kUnimplemented (on every rank alike, so nobody waits for an exchange). Sums of random data
// with exponents spread over 2^-22..1, so the sum's rounding and the scale's both show.
// Returns "" or the failure.
inline std::string CheckRunScaled(Communicator& comm, AllreduceAlgorithm& algo, DataType dtype,
                                  size_t count, bool in_place, double factor) {
  const size_t es = DataTypeSize(dtype);
  auto fill = [&](std::vector<char>* buf) {
    buf->assign(count * es, 0);
    for (size_t i = 0; i < count; ++i) {
      const double v = std::ldexp(RandomUnit(comm.Rank(), i), -static_cast<int>(i % 23));
      if (dtype == DataType::kFloat32) {
        const float f = static_cast<float>(v);
        std::memcpy(buf->data() + i * es, &f, es);
      } else {
        std::memcpy(buf->data() + i * es, &v, es);
      }
    }
  };
  const std::string name = std::string(algo.Name()) + " RunScaled " +
                           std::string(DataTypeName(dtype)) + " count=" + std::to_string(count) +
                           " by " + std::to_string(factor) + (in_place ? " in place" : "") +
                           " rank " + std::to_string(comm.Rank()) + "/" +
                           std::to_string(comm.Size());
  std::vector<char> input, expected(count * es), got(count * es, 0x5a);
  fill(&input);
  Status s = algo.Run(comm, {input.data(), expected.data(), count, dtype, ReduceOp::kSum});
  if (!s.ok()) return name + ": Run: " + s.ToString();
  s = ScaleCopy(expected.data(), expected.data(), count, dtype, factor);
  if (!s.ok()) return name + ": ScaleCopy: " + s.ToString();
  if (in_place) std::memcpy(got.data(), input.data(), input.size());
  s = algo.RunScaled(
      comm, {in_place ? got.data() : input.data(), got.data(), count, dtype, ReduceOp::kSum},
      factor);
  if (!algo.CanRunScaled(dtype) && factor != 1.0) {
    return s.code() == StatusCode::kUnimplemented ? "" : name + ": not refused: " + s.ToString();
  }
  if (!s.ok()) return name + ": " + s.ToString();
  if (std::memcmp(got.data(), expected.data(), got.size()) != 0) {
    size_t i = 0;
    while (std::memcmp(got.data() + i * es, expected.data() + i * es, es) == 0) ++i;
    return name + ": element " + std::to_string(i) + " differs in bits from Run + ScaleCopy";
  }
  return "";
}

}  // namespace kolo::testing

#endif  // KOLO_TESTS_UNIT_ALGORITHM_CHECK_H_
