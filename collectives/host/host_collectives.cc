#include "collectives/host/host_collectives.h"

#include <cmath>

namespace kolo {
namespace {

double P(const HostCostInput& in) { return std::max(1, in.ranks); }
double Log2P(const HostCostInput& in) { return std::ceil(std::log2(P(in))); }
double Share(const HostCostInput& in) { return (P(in) - 1) / P(in) * in.bytes; }

Status RingReduceScatterDefault(Communicator& comm, const void* send, void* recv,
                                const std::vector<size_t>& counts, DataType dtype, ReduceOp op,
                                std::vector<char>* scratch) {
  return RingReduceScatter(comm, send, recv, counts, dtype, op, scratch);
}

}  // namespace

const std::vector<HostAlgorithm<AllgathervFn>>& HostAllgathervAlgorithms() {
  static const std::vector<HostAlgorithm<AllgathervFn>> table = {
      {"ring", "(p-1) alpha + (p-1)/p n beta",
       [](const HostCostInput& in) {
         return (P(in) - 1) * in.link.alpha_us + Share(in) * in.link.beta_us;
       },
       &RingAllgatherv},
      {"rd", "log2(p) alpha + (p-1)/p n beta (power-of-two p; otherwise ring's)",
       [](const HostCostInput& in) {
         const int p = static_cast<int>(P(in));
         const double steps = (p & (p - 1)) == 0 ? Log2P(in) : P(in) - 1;
         return steps * in.link.alpha_us + Share(in) * in.link.beta_us;
       },
       &RecursiveDoublingAllgatherv},
  };
  return table;
}

const std::vector<HostAlgorithm<BroadcastFn>>& HostBroadcastAlgorithms() {
  static const std::vector<HostAlgorithm<BroadcastFn>> table = {
      {"binomial", "ceil(log2 p) (alpha + n beta)",
       [](const HostCostInput& in) {
         return Log2P(in) * (in.link.alpha_us + in.bytes * in.link.beta_us);
       },
       &BinomialBroadcast},
      {"scatter_allgather", "(ceil(log2 p) + p - 1) alpha + 2 (p-1)/p n beta",
       [](const HostCostInput& in) {
         if (P(in) == 1) return 0.0;
         return (Log2P(in) + P(in) - 1) * in.link.alpha_us + 2 * Share(in) * in.link.beta_us;
       },
       &ScatterAllgatherBroadcast},
  };
  return table;
}

const std::vector<HostAlgorithm<ReduceScatterFn>>& HostReduceScatterAlgorithms() {
  static const std::vector<HostAlgorithm<ReduceScatterFn>> table = {
      {"ring", "(p-1) alpha + (p-1)/p n (beta + gamma)",
       [](const HostCostInput& in) {
         return (P(in) - 1) * in.link.alpha_us + Share(in) * (in.link.beta_us + in.gamma_us);
       },
       &RingReduceScatterDefault},
  };
  return table;
}

const std::vector<HostAlgorithm<AlltoallvFn>>& HostAlltoallvAlgorithms() {
  static const std::vector<HostAlgorithm<AlltoallvFn>> table = {
      {"pairwise", "(p-1) alpha + (p-1)/p n beta",
       [](const HostCostInput& in) {
         return (P(in) - 1) * in.link.alpha_us + Share(in) * in.link.beta_us;
       },
       &PairwiseAlltoallv},
  };
  return table;
}

}  // namespace kolo
