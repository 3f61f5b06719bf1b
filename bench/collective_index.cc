#include "bench/collective_index.h"

namespace kolo::bench {

PatternElement SendElement(Collective c, int rank, int nranks, int /*root*/, int64_t count,
                           int64_t j) {
  const int64_t n = nranks;
  switch (c) {
    case Collective::kAllgather:
      return {false, rank, rank * count + j};
    case Collective::kAlltoall:
      return {false, rank, ((j / count) * n + rank) * count + j % count};
    default:
      return {false, rank, j};
  }
}

PatternElement RecvElement(Collective c, int rank, int nranks, int root, int64_t count, int64_t j) {
  const int64_t n = nranks;
  switch (c) {
    case Collective::kAllreduce:
      return {true, 0, j};
    case Collective::kReducescatter:
      return {true, 0, rank * count + j};
    case Collective::kAllgather:
      return {false, static_cast<int>(j / count), j};
    case Collective::kBroadcast:
      return {false, root, j};
    case Collective::kAlltoall:
      return {false, static_cast<int>(j / count), (rank * n + j / count) * count + j % count};
  }
  return {};
}

int64_t CountWrongElements(Collective c, int rank, int nranks, int root, int64_t count,
                           int64_t recv_count, const std::function<double(int64_t)>& got,
                           const std::function<double(const PatternElement&)>& want,
                           int64_t* first_bad) {
  int64_t wrong = 0;
  for (int64_t j = 0; j < recv_count; ++j) {
    if (got(j) == want(RecvElement(c, rank, nranks, root, count, j))) continue;
    if (wrong == 0 && first_bad != nullptr) *first_bad = j;
    ++wrong;
  }
  return wrong;
}

}  // namespace kolo::bench
