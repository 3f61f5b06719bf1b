#include "collectives/nccl/nccl_allreduce.h"

#include <algorithm>
#include <string>

#include "base/ascii.h"
#include "collectives/nccl/nccl_cost.h"
#include "collectives/nccl/nccl_run.h"

namespace kolo {

namespace {

// The part of NCCL_ALGO that applies to the all-reduce. Sections are separated by ';': a
// first section without a collective's name applies to every collective, a later
// "allreduce:" section overrides it (the last one wins); "" when nothing applies.
std::string AllreduceSection(const std::string& value) {
  std::string part;
  size_t at = 0;
  for (bool first = true; at <= value.size(); first = false) {
    const size_t end = std::min(value.find(';', at), value.size());
    const std::string section = value.substr(at, end - at);
    const size_t colon = section.find(':');
    if (colon == std::string::npos) {
      if (first) part = section;
    } else if (section.substr(0, colon) == "allreduce") {
      part = section.substr(colon + 1);
    }
    at = end + 1;
  }
  return part;
}

}  // namespace

NcclAllreduceAlgorithm ParseNcclAlgo(std::string_view nccl_algo) {
  std::string list = AllreduceSection(AsciiLower(nccl_algo));
  const bool exclude = !list.empty() && list.front() == '^';
  if (exclude) list.erase(0, 1);
  bool ring = false, tree = false;
  size_t at = 0;
  while (at <= list.size() && !list.empty()) {
    const size_t end = std::min(list.find(',', at), list.size());
    const std::string name = list.substr(at, end - at);
    ring |= name == "ring";
    tree |= name == "tree";
    at = end + 1;
  }
  if (exclude) std::swap(ring, tree);  // "^tree" leaves the ring, "^ring" the tree
  if (ring && !tree) return NcclAllreduceAlgorithm::kRing;
  if (tree && !ring) return NcclAllreduceAlgorithm::kTree;
  return NcclAllreduceAlgorithm::kEither;
}

Status NcclAllreduce::Supports(const SelectionInput& in) const {
  return SupportsNcclInput(in, Name());
}

double NcclAllreduce::RingMicros(const SelectionInput& in) {
  const int p = std::max(1, in.ranks);
  if (p == 1) return kNcclCallUs;
  const double chunk = static_cast<double>(in.bytes) / p;
  return kNcclCallUs + 2.0 * (p - 1) * (DeviceFlatAlpha(in) + chunk * DeviceFlatBeta(in));
}

double NcclAllreduce::TreeMicros(const SelectionInput& in) {
  if (in.nodes < 2) return -1.0;
  const LinkCost& net = in.cost->device_inter;
  const LinkCost& gpu = in.cost->device_intra;
  const double depth = CeilLog2(in.nodes) * net.alpha_us + (in.max_local_size - 1) * gpu.alpha_us;
  return kNcclCallUs + 2.0 * depth + 2.0 * static_cast<double>(in.bytes) * DeviceFlatBeta(in);
}

double NcclAllreduce::EstimateMicros(const SelectionInput& in) const {
  const double ring = RingMicros(in);
  const double tree = TreeMicros(in);
  switch (algorithm_) {
    case NcclAllreduceAlgorithm::kRing:
      return ring;
    case NcclAllreduceAlgorithm::kTree:
      // One node: NCCL's "tree" is the chain, which the ring's formula bounds from below.
      return tree < 0 ? ring : tree;
    case NcclAllreduceAlgorithm::kEither:
      break;
  }
  return tree < 0 ? ring : std::min(ring, tree);
}

Status NcclAllreduce::Run(Communicator& comm, const AllreduceArgs& args) {
  return RunNcclAllreduce(comm, args);
}

Status NcclAllreduce::Enqueue(Communicator& comm, const AllreduceArgs& args) {
  return EnqueueNcclAllreduce(comm, args);
}

NcclPostscale NcclPostscaleFor(DataType dtype, double postscale, int ranks) {
  if (!IsFloatingPoint(dtype) || postscale == 1.0) return NcclPostscale::kNone;
  // One rank: NCCL runs its one-rank kernel, which (NCCL 2.28.9 on an H200, kolo-gpu-check's
  // raw PreMulSum row) left the last count % 16 elements of a float32 PreMulSum out of place
  // unwritten. The all-reduce of one rank is a copy; the caller's own scaling pass costs the same.
  if (ranks == 1) return NcclPostscale::kNone;
  // The same expression as LowerReduce's Average, so Average matches exactly.
  if (ranks > 0 && postscale == 1.0 / ranks) return NcclPostscale::kAverage;
  if (dtype == DataType::kFloat32 || dtype == DataType::kFloat64) return NcclPostscale::kPreMulSum;
  return NcclPostscale::kNone;
}

bool NcclAllreduce::FoldsPostscale(DataType dtype, double postscale, int ranks) const {
  return postscale == 1.0 || NcclPostscaleFor(dtype, postscale, ranks) != NcclPostscale::kNone;
}

Status NcclAllreduce::EnqueueScaled(Communicator& comm, const AllreduceArgs& args,
                                    double postscale) {
  return EnqueueNcclAllreduce(comm, args, postscale);
}

}  // namespace kolo
