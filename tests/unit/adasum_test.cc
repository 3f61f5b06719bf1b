// Tier 1 of the Adasum all-reduce (collectives/host/adasum_allreduce.h) in the thread world at
// 1, 2 and 4 ranks, float16/32/64: single tensors of many lengths (odd ones, fewer elements
// than ranks, none) and fused buffers of 3 tensors, in place and out of place, against the
// tree reference of adasum_reference.h computed per tensor from every rank's known inputs;
// every rank must end with the same bits. Closed forms that need no reference: orthogonal
// vectors add, parallel ones average, zero vectors are the identity and never give a NaN.
// And the refusals: 3 ranks (naming the count), other ops and dtypes, counts that disagree.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include "collectives/host/adasum_allreduce.h"
#include "unit/adasum_reference.h"
#include "unit/thread_world.h"
#include "unit/typed_data.h"

namespace kolo::testing {
namespace {

// Rank r's element i of tensor `seed`: a part every rank shares plus the rank's own, so the
// ranks' vectors are correlated (the coefficients are far from 1) but not parallel, scaled by
// 2^(r mod 3) so left and right coefficients differ. Multiples of 2^-8 up to 4 in magnitude:
// exact in float16, so every dtype starts from the same values.
double Input(uint64_t seed, int rank, size_t i) {
  auto mix = [](uint64_t h) {
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    return h;
  };
  const uint64_t shared = mix((seed + 1) * 0x9e3779b97f4a7c15ull ^ (i + 1) * 0x94d049bb133111ebull);
  const uint64_t own = mix(shared ^ (static_cast<uint64_t>(rank) + 1) * 0xc2b2ae3d27d4eb4full);
  const int k = static_cast<int>(shared % 257) - 128 + static_cast<int>(own % 257) - 128;
  return std::ldexp(k, (rank % 3) - 8);
}

// Unit roundoff of the dtype the algorithm rounds to at each level.
double Roundoff(DataType t) {
  return t == DataType::kFloat16   ? std::ldexp(1, -11)
         : t == DataType::kFloat32 ? std::ldexp(1, -24)
                                   : std::ldexp(1, -53);
}

std::string Label(DataType t, const std::vector<size_t>& counts, bool in_place, int ranks) {
  std::string s = std::string(DataTypeName(t)) + " counts [";
  for (size_t i = 0; i < counts.size(); ++i) s += (i ? "," : "") + std::to_string(counts[i]);
  return s + "]" + (in_place ? " in-place" : " out-of-place") + " ranks=" + std::to_string(ranks);
}

// Runs one fused layout (one tensor: Run; several: RunFused) on this rank with Input() data
// and checks every tensor against the tree reference. Appends this rank's output bytes to
// *bits for the same-bits check. Every rank calls it with the same arguments.
void CheckLayout(Communicator& comm, AdasumAllreduce& algo, DataType t,
                 const std::vector<size_t>& counts, bool in_place, uint64_t seed,
                 std::vector<char>* bits) {
  const int ranks = comm.Size();
  const std::string label = Label(t, counts, in_place, ranks);
  size_t total = 0;
  for (size_t c : counts) total += c;
  std::vector<char> in = Buffer(t, total), out = Buffer(t, total);
  for (size_t k = 0, at = 0; k < counts.size(); at += counts[k++]) {
    for (size_t i = 0; i < counts[k]; ++i)
      Store(t, in.data(), at + i, Input(seed + k, comm.Rank(), i));
  }
  const std::vector<char> original = in;
  AllreduceArgs args{in.data(), in_place ? in.data() : out.data(), total, t, ReduceOp::kAdasum};
  const Status s = counts.size() == 1 ? algo.Run(comm, args) : algo.RunFused(comm, args, counts);
  ASSERT_TRUE(s.ok()) << label << ": " << s.ToString();
  const char* result = in_place ? in.data() : out.data();
  if (!in_place) {
    EXPECT_EQ(in, original) << label << ": the input changed";
  }

  const int levels = static_cast<int>(std::log2(ranks));
  for (size_t k = 0, at = 0; k < counts.size(); at += counts[k++]) {
    std::vector<std::vector<double>> inputs(ranks, std::vector<double>(counts[k]));
    double scale = 0;  // sum over ranks of the largest |input|: bounds every value on the way
    for (int r = 0; r < ranks; ++r) {
      double largest = 0;
      for (size_t i = 0; i < counts[k]; ++i) {
        inputs[r][i] = Input(seed + k, r, i);
        largest = std::max(largest, std::fabs(inputs[r][i]));
      }
      scale += largest;
    }
    const std::vector<double> want = AdasumReference(inputs);
    const double tol = 4 * (levels + 1) * Roundoff(t) * scale;
    size_t wrong = 0;
    for (size_t i = 0; i < counts[k]; ++i) {
      const double got = Load(t, result, at + i);
      if (!(std::fabs(got - want[i]) <= tol) && wrong++ == 0) {
        ADD_FAILURE() << label << " rank " << comm.Rank() << " tensor " << k << ": first wrong "
                      << "index " << i << ": expected " << want[i] << ", got " << got
                      << " (tolerance " << tol << ")";
      }
    }
    EXPECT_EQ(wrong, 0u) << label << " tensor " << k << " of " << counts[k] << " elements";
  }
  bits->insert(bits->end(), result, result + total * DataTypeSize(t));
}

struct Param {
  int ranks;
  DataType dtype;
};
void PrintTo(const Param& p, std::ostream* os) {
  *os << DataTypeName(p.dtype) << " at " << p.ranks << " ranks";
}

class AdasumTest : public ::testing::TestWithParam<Param> {};

// Each rank's outputs of every case, concatenated, to compare across ranks afterwards.
class RankBits {
 public:
  explicit RankBits(int ranks) : bits_(ranks) {}
  void Set(int rank, std::vector<char> b) {
    std::lock_guard<std::mutex> lock(mu_);
    bits_[rank] = std::move(b);
  }
  void ExpectSameOnEveryRank() const {
    for (size_t r = 1; r < bits_.size(); ++r) {
      EXPECT_TRUE(bits_[r] == bits_[0]) << "rank " << r << "'s result differs from rank 0's";
    }
  }

 private:
  std::mutex mu_;
  std::vector<std::vector<char>> bits_;
};

TEST_P(AdasumTest, TensorsMatchTheTreeReference) {
  const int ranks = GetParam().ranks;
  const DataType t = GetParam().dtype;
  RankBits all(ranks);
  RunOnThreadWorld(ranks, [&](Communicator& comm) {
    AdasumAllreduce algo;  // one per rank, reused: its scratch grows and shrinks never
    std::vector<char> bits;
    uint64_t seed = 0;
    bool in_place = true;
    for (size_t n : {0, 1, 2, 3, 5, 64, 1023, 4097}) {
      CheckLayout(comm, algo, t, {n}, in_place, seed += 10, &bits);
      in_place = !in_place;
    }
    const std::vector<std::vector<size_t>> fused = {{7, 1, 130}, {1000, 3, 2}, {0, 5, 1}};
    for (const auto& counts : fused) {
      for (bool place : {true, false}) CheckLayout(comm, algo, t, counts, place, seed += 10, &bits);
    }
    all.Set(comm.Rank(), std::move(bits));
  });
  all.ExpectSameOnEveryRank();
}

// Runs fn's inputs (fn(rank, i) for rank's element i) through Adasum on every rank and returns
// rank 0's result as doubles.
template <typename F>
std::vector<double> RunWith(int ranks, DataType t, size_t n, F fn) {
  std::vector<double> result(n);
  RunOnThreadWorld(ranks, [&](Communicator& comm) {
    std::vector<char> buf = Buffer(t, n);
    for (size_t i = 0; i < n; ++i) Store(t, buf.data(), i, fn(comm.Rank(), i));
    AdasumAllreduce algo;
    const Status s = algo.Run(comm, {buf.data(), buf.data(), n, t, ReduceOp::kAdasum});
    ASSERT_TRUE(s.ok()) << s.ToString();
    if (comm.Rank() == 0) {
      for (size_t i = 0; i < n; ++i) result[i] = Load(t, buf.data(), i);
    }
  });
  return result;
}

TEST_P(AdasumTest, OrthogonalVectorsAdd) {
  const int ranks = GetParam().ranks;
  const DataType t = GetParam().dtype;
  // Rank r is non-zero only where i mod ranks == r: every dot product is exactly 0, so every
  // coefficient is 1 and the result is the plain sum, exactly.
  auto value = [&](int r, size_t i) {
    return i % ranks == static_cast<size_t>(r) ? Input(1, r, i) : 0.0;
  };
  const std::vector<double> got = RunWith(ranks, t, 37, value);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i], Input(1, static_cast<int>(i % ranks), i)) << "index " << i;
  }
}

TEST_P(AdasumTest, ParallelVectorsAverage) {
  const int ranks = GetParam().ranks;
  const DataType t = GetParam().dtype;
  // Equal vectors: a.b == |a|^2 == |b|^2, both coefficients are 1/2, the result is the vector.
  const std::vector<double> same =
      RunWith(ranks, t, 29, [](int, size_t i) { return Input(2, 0, i); });
  for (size_t i = 0; i < same.size(); ++i) EXPECT_EQ(same[i], Input(2, 0, i)) << "index " << i;
  // c_r x: each pair gives the mean of its two, so the tree gives the mean of all c_r (what
  // Horovod's test_parallel checks).
  auto c = [](int r) { return 1.0 + r % 3; };
  const std::vector<double> scaled =
      RunWith(ranks, t, 29, [&](int r, size_t i) { return c(r) * Input(2, 0, i); });
  double mean = 0;
  for (int r = 0; r < ranks; ++r) mean += c(r) / ranks;
  const int levels = static_cast<int>(std::log2(ranks));
  for (size_t i = 0; i < scaled.size(); ++i) {
    const double want = mean * Input(2, 0, i);
    EXPECT_NEAR(scaled[i], want, 4 * (levels + 1) * Roundoff(t) * 3 * 4) << "index " << i;
  }
}

TEST_P(AdasumTest, ZeroVectorsAreTheIdentityAndGiveNoNaN) {
  const int ranks = GetParam().ranks;
  const DataType t = GetParam().dtype;
  // Rank 0 all zeros: Adasum(0, b) = b at level 1, so the result is the tree over the others
  // with rank 1's vector in rank 0's place.
  const std::vector<double> got =
      RunWith(ranks, t, 19, [](int r, size_t i) { return r == 0 ? 0.0 : Input(3, r, i); });
  std::vector<std::vector<double>> inputs(ranks, std::vector<double>(19, 0.0));
  for (int r = 1; r < ranks; ++r) {
    for (size_t i = 0; i < 19; ++i) inputs[r][i] = Input(3, r, i);
  }
  const std::vector<double> want = AdasumReference(inputs);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << "index " << i;
    EXPECT_NEAR(got[i], want[i], 16 * Roundoff(t) * 8) << "index " << i;
  }
  if (ranks == 2) {
    // Adasum(0, b) = b exactly: at 2 ranks the result is rank 1's vector, bit for bit.
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], Input(3, 1, i)) << "index " << i;
  }
  const std::vector<double> zeros = RunWith(ranks, t, 11, [](int, size_t) { return 0.0; });
  for (size_t i = 0; i < zeros.size(); ++i) EXPECT_EQ(zeros[i], 0.0) << "index " << i;
  if (t == DataType::kFloat64) {
    // Squared norms below sqrt(DBL_MIN) (Horovod's threshold, not == 0): coefficients are 1 and
    // the result is the plain sum, where the formula would divide subnormal by subnormal.
    auto tiny = [](int r, size_t i) { return std::ldexp(Input(4, r, i), -530); };
    const std::vector<double> sum = RunWith(ranks, t, 9, tiny);
    for (size_t i = 0; i < sum.size(); ++i) {
      double want = 0;
      for (int r = 0; r < ranks; ++r) want += tiny(r, i);
      EXPECT_EQ(sum[i], want) << "index " << i;
    }
  }
}

// The pairing is part of the result (Adasum is not associative): on this data the tree
// (0,1),(2,3) and the tree (0,2),(1,3) differ by far more than the tolerances above, so the
// reference pins the algorithm to Horovod's pairing.
TEST(AdasumReferenceTree, ThePairingChangesTheResult) {
  std::vector<std::vector<double>> x(4, std::vector<double>(130));
  for (int r = 0; r < 4; ++r) {
    for (size_t i = 0; i < 130; ++i) x[r][i] = Input(5, r, i);
  }
  const std::vector<double> tree = AdasumReference(x);
  const std::vector<double> other = AdasumPair(AdasumPair(x[0], x[2]), AdasumPair(x[1], x[3]));
  double largest = 0;
  for (size_t i = 0; i < tree.size(); ++i)
    largest = std::max(largest, std::fabs(tree[i] - other[i]));
  EXPECT_GT(largest, 0.2);
}

INSTANTIATE_TEST_SUITE_P(
    RanksAndDtypes, AdasumTest,
    ::testing::Values(Param{1, DataType::kFloat16}, Param{1, DataType::kFloat32},
                      Param{1, DataType::kFloat64}, Param{2, DataType::kFloat16},
                      Param{2, DataType::kFloat32}, Param{2, DataType::kFloat64},
                      Param{4, DataType::kFloat16}, Param{4, DataType::kFloat32},
                      Param{4, DataType::kFloat64}),
    [](const ::testing::TestParamInfo<Param>& info) {
      return std::string(DataTypeName(info.param.dtype)) + "_np" + std::to_string(info.param.ranks);
    });

// The fused check can tell tensors apart: treating the fused buffer as one vector gives a
// different answer, by more than the tolerance, so a mix-up of the boundaries would fail.
TEST(AdasumFused, OneVectorWouldDifferFromSeparateTensors) {
  const std::vector<size_t> counts = {7, 1, 130};
  std::vector<std::vector<double>> whole(4);
  std::vector<double> separate;
  for (size_t k = 0; k < counts.size(); ++k) {
    std::vector<std::vector<double>> inputs(4, std::vector<double>(counts[k]));
    for (int r = 0; r < 4; ++r) {
      for (size_t i = 0; i < counts[k]; ++i) inputs[r][i] = Input(100 + k, r, i);
      whole[r].insert(whole[r].end(), inputs[r].begin(), inputs[r].end());
    }
    const std::vector<double> one = AdasumReference(inputs);
    separate.insert(separate.end(), one.begin(), one.end());
  }
  const std::vector<double> mixed = AdasumReference(whole);
  double largest = 0;
  for (size_t i = 0; i < mixed.size(); ++i)
    largest = std::max(largest, std::fabs(mixed[i] - separate[i]));
  // CheckLayout's largest tolerance (float16 at 4 ranks) is 12 x 2^-11 x 7, about 0.04.
  EXPECT_GT(largest, 0.2);
}

TEST(AdasumRefusals, ThreeRanksFailOnEveryRankNamingTheCount) {
  RunOnThreadWorld(3, [&](Communicator& comm) {
    std::vector<float> x(8, 1.0f);
    AdasumAllreduce algo;
    const Status s =
        algo.Run(comm, {x.data(), x.data(), x.size(), DataType::kFloat32, ReduceOp::kAdasum});
    EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s.ToString();
    EXPECT_NE(s.message().find("power-of-two"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("has 3"), std::string::npos) << s.message();
    EXPECT_EQ(x, std::vector<float>(8, 1.0f)) << "a refused run must not touch the buffer";
  });
  SelectionInput in;
  CostModel cost;
  in.cost = &cost;
  in.op = ReduceOp::kAdasum;
  in.ranks = 6;
  EXPECT_EQ(AdasumAllreduce().Supports(in).code(), StatusCode::kUnimplemented);
  in.ranks = 8;
  EXPECT_TRUE(AdasumAllreduce().Supports(in).ok());
  EXPECT_GT(AdasumAllreduce().EstimateMicros(in), 0);
}

TEST(AdasumRefusals, OtherOpsDtypesAndDisagreeingCounts) {
  RunOnThreadWorld(2, [&](Communicator& comm) {
    AdasumAllreduce algo;
    std::vector<int32_t> ints(4, 1);
    Status s = algo.Run(comm, {ints.data(), ints.data(), 4, DataType::kInt32, ReduceOp::kAdasum});
    EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
    EXPECT_NE(s.message().find("int32"), std::string::npos) << s.message();
    std::vector<float> x(4, 1.0f);
    s = algo.Run(comm, {x.data(), x.data(), 4, DataType::kFloat32, ReduceOp::kSum});
    EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
    EXPECT_NE(s.message().find("sum"), std::string::npos) << s.message();
    s = algo.RunFused(comm, {x.data(), x.data(), 4, DataType::kFloat32, ReduceOp::kAdasum}, {1, 2});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("add up to 3"), std::string::npos) << s.message();
  });
}

}  // namespace
}  // namespace kolo::testing
