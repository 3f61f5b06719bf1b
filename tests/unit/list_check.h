// CheckList: one list all-reduce (AllreduceAlgorithm::RunList) of tensors of given counts,
// each element checked against the reference computed from every rank's known inputs in the
// dtype's own arithmetic and rank order (the bits shm gives for one buffer), and the guard
// elements between the tensors checked untouched. Shared by the unit tier (thread worlds,
// tests/unit/shm_list_test.cc) and the MPI tier (tests/mpi/algorithms_main.cc).
#ifndef KOLO_TESTS_UNIT_LIST_CHECK_H_
#define KOLO_TESTS_UNIT_LIST_CHECK_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "collectives/algorithm.h"

namespace kolo::testing {

inline constexpr size_t kListGuard = 3;  // elements between two tensors in the test's buffers

template <typename T>
constexpr DataType ListTypeOf() {
  if constexpr (std::is_same_v<T, float>) return DataType::kFloat32;
  if constexpr (std::is_same_v<T, double>) return DataType::kFloat64;
  return DataType::kInt32;
}

// Rank r's element i of the concatenation: floating values that round when summed, small
// integers that do not overflow a product of four.
template <typename T>
T ListInput(int rank, size_t i) {
  const uint64_t h =
      (static_cast<uint64_t>(rank) + 1) * 0x9E3779B97F4A7C15ull ^ (i * 0xBF58476D1CE4E5B9ull);
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(
        std::ldexp(static_cast<double>(h % 2000003) - 1000001.0, -static_cast<int>(h % 23)));
  } else {
    return static_cast<T>(static_cast<int64_t>(h % 19) - 9);
  }
}

template <typename T>
T ListCombine(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::kMax:
      return a < b ? b : a;
    case ReduceOp::kMin:
      return b < a ? b : a;
    case ReduceOp::kProduct:
      return static_cast<T>(a * b);
    default:
      return static_cast<T>(a + b);
  }
}

// One RunList of tensors of `counts` elements; "" or what went wrong on this rank.
template <typename T>
std::string CheckList(Communicator& comm, AllreduceAlgorithm& algo,
                      const std::vector<size_t>& counts, ReduceOp op, double scale, bool in_place) {
  const T kUntouched = static_cast<T>(-77);
  size_t total = 0;
  for (size_t c : counts) total += c;
  // Tensor k occupies [start[k], start[k] + counts[k]) of the buffers, kListGuard apart.
  std::vector<size_t> start;
  size_t at = kListGuard;
  for (size_t c : counts) {
    start.push_back(at);
    at += c + kListGuard;
  }
  std::vector<T> send(at, kUntouched), recv(at, kUntouched);
  std::vector<AllreducePart> parts;
  size_t index = 0;  // in the concatenation
  for (size_t k = 0; k < counts.size(); ++k) {
    for (size_t i = 0; i < counts[k]; ++i) send[start[k] + i] = ListInput<T>(comm.Rank(), index++);
    T* out = in_place ? send.data() : recv.data();
    parts.push_back(AllreducePart{send.data() + start[k], out + start[k], counts[k]});
  }
  const std::string what = std::string(DataTypeName(ListTypeOf<T>())) + " " +
                           std::string(ReduceOpName(op)) + " " + std::to_string(counts.size()) +
                           " tensors, " + std::to_string(total) + " elements" +
                           (scale != 1.0 ? " scale " + std::to_string(scale) : "") +
                           (in_place ? " in place" : "") + ", rank " + std::to_string(comm.Rank());
  const Status s = algo.RunList(comm, parts, ListTypeOf<T>(), op, scale);
  if (!s.ok()) return what + ": " + s.ToString();
  const std::vector<T>& out = in_place ? send : recv;
  // Each buffer element's index in the concatenation, or -1 for a guard.
  std::vector<int64_t> of(at, -1);
  index = 0;
  for (size_t k = 0; k < counts.size(); ++k) {
    for (size_t i = 0; i < counts[k]; ++i) of[start[k] + i] = static_cast<int64_t>(index++);
  }
  for (size_t e = 0; e < at; ++e) {
    if (of[e] < 0) {
      if (std::memcmp(&out[e], &kUntouched, sizeof(T)) != 0) {
        return what + ": guard element " + std::to_string(e) + " was written";
      }
      continue;
    }
    const size_t i = static_cast<size_t>(of[e]);
    T want = ListInput<T>(0, i);
    for (int r = 1; r < comm.Size(); ++r) want = ListCombine(op, want, ListInput<T>(r, i));
    if (scale != 1.0) want = static_cast<T>(want * static_cast<T>(scale));
    if (std::memcmp(&want, &out[e], sizeof(T)) != 0) {
      return what + ": element " + std::to_string(i) + " of the concatenation got " +
             std::to_string(out[e]) + " want " + std::to_string(want);
    }
  }
  return "";
}

}  // namespace kolo::testing

#endif  // KOLO_TESTS_UNIT_LIST_CHECK_H_
