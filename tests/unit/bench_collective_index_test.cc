// kolo-bench's element mapping (bench/collective_index.h) against collectives simulated here from
// their definitions: correct outputs give no wrong element at 1..4 ranks, and the mistakes a
// collective can make (a swapped alltoall chunk, an allgather chunk at the wrong offset, the
// wrong broadcast root, a reduce-scatter share of the wrong rank) are each counted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "bench/collective_index.h"

namespace kolo::bench {
namespace {

// A pattern in which every (rank, index) has its own value, as check.h's is.
double Input(int rank, int64_t index) { return 1000003.0 * rank + static_cast<double>(index); }

struct Sim {
  Collective c;
  int n;
  int root;
  int64_t count;

  CollectiveLayout Layout() const {
    CollectiveLayout l;
    l.count = count;
    switch (c) {
      case Collective::kAllreduce:
      case Collective::kBroadcast:
        l.send = l.recv = count;
        break;
      case Collective::kAllgather:
        l.send = count;
        l.recv = count * n;
        break;
      case Collective::kReducescatter:
        l.send = count * n;
        l.recv = count;
        break;
      case Collective::kAlltoall:
        l.send = l.recv = count * n;
        break;
    }
    return l;
  }

  double Want(const PatternElement& e) const {
    if (!e.reduced) return Input(e.rank, e.index);
    double sum = 0;
    for (int r = 0; r < n; ++r) sum += Input(r, e.index);
    return sum;
  }

  // Every rank's send buffer as the bench fills it.
  std::vector<std::vector<double>> Sends() const {
    const CollectiveLayout l = Layout();
    std::vector<std::vector<double>> sends(n, std::vector<double>(l.send));
    for (int r = 0; r < n; ++r) {
      for (int64_t j = 0; j < l.send; ++j) {
        const PatternElement e = SendElement(c, r, n, root, count, j);
        EXPECT_FALSE(e.reduced);
        EXPECT_EQ(e.rank, r);
        sends[r][j] = Input(e.rank, e.index);
      }
    }
    return sends;
  }

  // The collective from its definition (MPI's and NCCL's), not from collective_index.h.
  std::vector<std::vector<double>> Run(const std::vector<std::vector<double>>& in) const {
    const CollectiveLayout l = Layout();
    std::vector<std::vector<double>> out(n, std::vector<double>(l.recv));
    for (int r = 0; r < n; ++r) {
      for (int64_t j = 0; j < l.recv; ++j) {
        double v = 0;
        switch (c) {
          case Collective::kAllreduce:
            for (int s = 0; s < n; ++s) v += in[s][j];
            break;
          case Collective::kReducescatter:
            for (int s = 0; s < n; ++s) v += in[s][r * count + j];
            break;
          case Collective::kAllgather:
            v = in[j / count][j % count];
            break;
          case Collective::kBroadcast:
            v = in[root][j];
            break;
          case Collective::kAlltoall:
            v = in[j / count][r * count + j % count];  // block r of the sender j / count
            break;
        }
        out[r][j] = v;
      }
    }
    return out;
  }

  int64_t Wrong(const std::vector<std::vector<double>>& out, int64_t* first_bad = nullptr) const {
    int64_t wrong = 0;
    for (int r = 0; r < n; ++r) {
      wrong += CountWrongElements(
          c, r, n, root, count, Layout().recv, [&](int64_t j) { return out[r][j]; },
          [&](const PatternElement& e) { return Want(e); }, first_bad);
    }
    return wrong;
  }
};

constexpr Collective kAll[] = {Collective::kAllreduce, Collective::kAllgather,
                               Collective::kBroadcast, Collective::kReducescatter,
                               Collective::kAlltoall};

TEST(BenchCollectiveIndexTest, CorrectOutputsHaveNoWrongElement) {
  for (const Collective c : kAll) {
    for (int n = 1; n <= 4; ++n) {
      for (const int64_t count : {0, 1, 3, 8}) {
        const Sim w{c, n, n - 1, count};
        EXPECT_EQ(w.Wrong(w.Run(w.Sends())), 0)
            << CollectiveName(c) << " n=" << n << " count=" << count;
      }
    }
  }
}

TEST(BenchCollectiveIndexTest, InputsDifferAcrossTheWhole) {
  // No two elements of the gathered or exchanged whole are the same value, so any misplacement
  // shows.
  for (const Collective c : {Collective::kAllgather, Collective::kAlltoall}) {
    for (int n = 2; n <= 4; ++n) {
      const Sim w{c, n, 0, 3};
      std::vector<double> all;
      for (const auto& s : w.Sends()) all.insert(all.end(), s.begin(), s.end());
      std::sort(all.begin(), all.end());
      EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end()) << CollectiveName(c);
    }
  }
}

TEST(BenchCollectiveIndexTest, SwappedAlltoallChunkIsWrong) {
  for (int n = 2; n <= 4; ++n) {
    const Sim w{Collective::kAlltoall, n, 0, 3};
    auto out = w.Run(w.Sends());
    // Rank 1 files the chunks from ranks 0 and 1 the other way round.
    for (int64_t k = 0; k < w.count; ++k) std::swap(out[1][k], out[1][w.count + k]);
    int64_t first = -1;
    EXPECT_EQ(w.Wrong(out, &first), 2 * w.count) << "n=" << n;
    EXPECT_EQ(first, 0);
  }
}

TEST(BenchCollectiveIndexTest, SenderUsingWrongBlockIsWrong) {
  for (int n = 2; n <= 4; ++n) {
    const Sim w{Collective::kAlltoall, n, 0, 2};
    auto in = w.Sends();
    std::swap(in[0][0], in[0][w.count]);  // rank 0 sends its block 0 to rank 1 and vice versa
    EXPECT_GT(w.Wrong(w.Run(in)), 0) << "n=" << n;
  }
}

TEST(BenchCollectiveIndexTest, AllgatherChunkAtWrongOffsetIsWrong) {
  for (int n = 2; n <= 4; ++n) {
    const Sim w{Collective::kAllgather, n, 0, 4};
    auto out = w.Run(w.Sends());
    // Every rank's copy has rank 1's chunk one element late (its first element written twice,
    // its last lost): every element but the first is wrong.
    for (int r = 0; r < n; ++r) {
      for (int64_t k = w.count - 1; k > 0; --k) out[r][w.count + k] = out[r][w.count + k - 1];
    }
    EXPECT_EQ(w.Wrong(out), n * (w.count - 1)) << "n=" << n;
  }
}

TEST(BenchCollectiveIndexTest, WrongBroadcastRootIsWrong) {
  for (int n = 2; n <= 4; ++n) {
    const Sim right{Collective::kBroadcast, n, 1, 5};
    const Sim wrong_root{Collective::kBroadcast, n, 0, 5};
    // The data of rank 0 broadcast, checked against root 1.
    EXPECT_EQ(right.Wrong(wrong_root.Run(right.Sends())), n * 5) << "n=" << n;
  }
}

TEST(BenchCollectiveIndexTest, ReduceScatterShareOfWrongRankIsWrong) {
  for (int n = 2; n <= 4; ++n) {
    const Sim w{Collective::kReducescatter, n, 0, 3};
    auto out = w.Run(w.Sends());
    std::swap(out[0], out[1]);
    EXPECT_EQ(w.Wrong(out), 2 * w.count) << "n=" << n;
  }
}

TEST(BenchCollectiveIndexTest, UnwrittenElementIsWrong) {
  const Sim w{Collective::kAllreduce, 3, 0, 4};
  auto out = w.Run(w.Sends());
  out[2][3] = std::nan("");  // the poison the sweep writes before each checked call
  int64_t first = -1;
  EXPECT_EQ(w.Wrong(out, &first), 1);
  EXPECT_EQ(first, 3);
}

}  // namespace
}  // namespace kolo::bench
