// NCCL's all-reduce as the selector sees it: one entry, predicted as the algorithm NCCL_ALGO
// leaves NCCL (ring, tree, or the cheaper of the two), with the two formulas recomputed here
// from collectives/nccl/nccl_allreduce.h's prose.
#include "collectives/nccl/nccl_allreduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "collectives/reduce.h"
#include "collectives/select/decision_table.h"
#include "collectives/select/registry.h"

namespace kolo {
namespace {

TEST(NcclAlgo, ReadAsNcclReadsIt) {
  using A = NcclAllreduceAlgorithm;
  EXPECT_EQ(ParseNcclAlgo(""), A::kEither);
  EXPECT_EQ(ParseNcclAlgo("Ring"), A::kRing);
  EXPECT_EQ(ParseNcclAlgo("TREE"), A::kTree);
  EXPECT_EQ(ParseNcclAlgo("Tree,Ring"), A::kEither);
  EXPECT_EQ(ParseNcclAlgo("ring,nvls"), A::kRing);
  EXPECT_EQ(ParseNcclAlgo("NVLS"), A::kEither);
  EXPECT_EQ(ParseNcclAlgo("^Tree"), A::kRing);
  EXPECT_EQ(ParseNcclAlgo("^ring"), A::kTree);
  EXPECT_EQ(ParseNcclAlgo("^nvls,collnetdirect"), A::kEither);
  EXPECT_EQ(ParseNcclAlgo("allgather:ring;allreduce:tree"), A::kTree);
  EXPECT_EQ(ParseNcclAlgo("allreduce:^tree;broadcast:ring"), A::kRing);
  EXPECT_EQ(ParseNcclAlgo("allgather:ring"), A::kEither);  // nothing said of the all-reduce
  // A first section without a name is every collective's; a named one overrides it.
  EXPECT_EQ(ParseNcclAlgo("Tree;allgather:ring"), A::kTree);
  EXPECT_EQ(ParseNcclAlgo("ring;allreduce:tree"), A::kTree);
  EXPECT_EQ(ParseNcclAlgo("allreduce:ring;allreduce:tree"), A::kTree);  // the last one wins
}

// 4 nodes x 8 GPUs; device_intra 0.5 us and 300 GB/s, device_inter 2 us and 25 GB/s (one
// GPU's NIC share: the node's 8 shares give 200 GB/s, the slower of the two).
SelectionInput Input(size_t bytes) {
  static const CostModel cost = [] {
    CostModel c;
    c.device_intra = {0.5, 1.0 / 300000};
    c.device_inter = {2.0, 1.0 / 25000};
    return c;
  }();
  SelectionInput in = JobSelectionInput(bytes, 4, 8, MemoryKind::kCuda);
  in.cost = &cost;
  in.dtype = DataType::kFloat32;
  in.count = bytes / 4;
  return in;
}

TEST(NcclAllreduce, PredictsTheAlgorithmNcclIsLeft) {
  const double c = 6.6, beta = std::max(1.0 / 300000, 1.0 / 25000 / 8);
  for (size_t bytes : {size_t{8}, size_t{1} << 20, size_t{1} << 30}) {
    const SelectionInput in = Input(bytes);
    const double n = static_cast<double>(bytes);
    const double ring = c + 2 * 31 * (2.0 + n / 32 * beta);
    const double tree = c + 2 * (2 * 2.0 + 7 * 0.5) + 2 * n * beta;
    EXPECT_NEAR(NcclAllreduce::RingMicros(in), ring, 1e-9 * ring) << bytes;
    EXPECT_NEAR(NcclAllreduce::TreeMicros(in), tree, 1e-9 * tree) << bytes;
    EXPECT_NEAR(NcclAllreduce(NcclAllreduceAlgorithm::kRing).EstimateMicros(in), ring, 1e-9 * ring);
    EXPECT_NEAR(NcclAllreduce(NcclAllreduceAlgorithm::kTree).EstimateMicros(in), tree, 1e-9 * tree);
    EXPECT_NEAR(NcclAllreduce().EstimateMicros(in), std::min(ring, tree),
                1e-9 * std::min(ring, tree));
  }
  // Which of the two is cheaper turns between the sizes: the tree's few start-ups at 8 B, the
  // ring's 2(31/32) n against the tree's 2 n at 1 GiB.
  EXPECT_LT(NcclAllreduce::TreeMicros(Input(8)), NcclAllreduce::RingMicros(Input(8)));
  EXPECT_LT(NcclAllreduce::RingMicros(Input(size_t{1} << 30)),
            NcclAllreduce::TreeMicros(Input(size_t{1} << 30)));
}

TEST(NcclAllreduce, OneNodeIsTheRingWhateverNcclAlgoSays) {
  SelectionInput in = Input(1 << 20);
  in.nodes = 1;
  in.ranks = in.max_local_size = in.min_local_size = 8;
  EXPECT_LT(NcclAllreduce::TreeMicros(in), 0);
  const double ring = NcclAllreduce::RingMicros(in);
  EXPECT_NEAR(ring, 6.6 + 2 * 7 * (0.5 + (1 << 20) / 8.0 / 300000), 1e-9);
  EXPECT_EQ(NcclAllreduce(NcclAllreduceAlgorithm::kTree).EstimateMicros(in), ring);
  EXPECT_EQ(NcclAllreduce().EstimateMicros(in), ring);
}

// The selector hands NCCL_ALGO to the entry: with Tree, the large message NCCL would run as a
// ring is predicted as the tree.
TEST(NcclAllreduce, SelectorPredictsByNcclAlgo) {
  const SelectionInput in = Input(size_t{1} << 30);
  const auto nccl_time = [&](const AllreduceSelector& s) {
    for (const auto& [algo, us] : s.Rank(in)) {
      if (algo->Name() == "nccl") return us;
    }
    return -1.0;
  };
  const CostModel cost = *in.cost;
  EXPECT_EQ(nccl_time(AllreduceSelector("", cost, "Tree")), NcclAllreduce::TreeMicros(in));
  EXPECT_EQ(nccl_time(AllreduceSelector("", cost, "")), NcclAllreduce::RingMicros(in));
}

// The names NCCL's all-reduce had as two entries are refused with the way to force NCCL now.
TEST(NcclAllreduce, OldNamesSayHowToForceNccl) {
  for (const char* name : {"nccl_ring", "nccl_tree"}) {
    auto picked = AllreduceSelector(name).Select(Input(1 << 20));
    ASSERT_FALSE(picked.ok()) << name;
    const std::string m(picked.status().message());
    EXPECT_NE(m.find(std::string("KOLO_ALLREDUCE_ALGO=") + name + ": no such all-reduce"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find(std::string("NCCL_ALGO=") + (name[5] == 'r' ? "Ring" : "Tree")),
              std::string::npos)
        << m;
  }
}

// Average folds into ncclAvg for every floating dtype (matched exactly as LowerReduce computes
// it); another postscale into a PreMulSum operator for float32 and float64 only; integers and
// the half types' other factors keep their own pass.
TEST(NcclAllreduce, PostscalesNcclCanFoldIntoTheReduction) {
  for (int ranks : {2, 3, 7, 49}) {
    const double average = LowerReduce(ReduceOp::kAverage, 1.0, ranks).float_postscale;
    for (DataType dtype :
         {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64}) {
      EXPECT_EQ(NcclPostscaleFor(dtype, average, ranks), NcclPostscale::kAverage)
          << DataTypeName(dtype) << " over " << ranks;
    }
    EXPECT_EQ(NcclPostscaleFor(DataType::kInt32, average, ranks), NcclPostscale::kNone);
  }
  EXPECT_EQ(NcclPostscaleFor(DataType::kFloat32, 0.5, 3), NcclPostscale::kPreMulSum);
  EXPECT_EQ(NcclPostscaleFor(DataType::kFloat64, 2.0 / 3, 3), NcclPostscale::kPreMulSum);
  EXPECT_EQ(NcclPostscaleFor(DataType::kFloat16, 0.5, 3), NcclPostscale::kNone);
  EXPECT_EQ(NcclPostscaleFor(DataType::kBFloat16, 2.0, 4), NcclPostscale::kNone);
  EXPECT_EQ(NcclPostscaleFor(DataType::kInt64, 0.5, 2), NcclPostscale::kNone);
  EXPECT_EQ(NcclPostscaleFor(DataType::kFloat32, 1.0, 4), NcclPostscale::kNone);
  // One rank: kolo scales itself (NCCL's one-rank kernel left a float32 PreMulSum's tail).
  EXPECT_EQ(NcclPostscaleFor(DataType::kFloat32, 0.5, 1), NcclPostscale::kNone);
  EXPECT_EQ(NcclPostscaleFor(DataType::kFloat64, 0.25, 1), NcclPostscale::kNone);
  const NcclAllreduce nccl;
  EXPECT_TRUE(nccl.FoldsPostscale(DataType::kFloat32, 0.5, 3));
  EXPECT_TRUE(nccl.FoldsPostscale(DataType::kInt64, 1.0, 2));  // nothing to fold
  EXPECT_FALSE(nccl.FoldsPostscale(DataType::kFloat16, 0.5, 3));
  EXPECT_FALSE(nccl.FoldsPostscale(DataType::kInt32, 0.5, 2));
}

}  // namespace
}  // namespace kolo
