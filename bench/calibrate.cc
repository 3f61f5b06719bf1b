#include "bench/calibrate.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <tuple>
#include <fstream>
#include <string>
#include <vector>

#include "bench/algorithms.h"
#include "bench/stats.h"
#include "collectives/host/shm_node.h"
#include "collectives/node_context.h"
#include "collectives/reduce.h"
#include "collectives/select/cost_model.h"
#include "collectives/select/registry.h"

namespace kolo::bench {
namespace {

// In cache: two 256 KiB buffers per rank fit a core's L2. Past the caches: two 32 MiB
// buffers per rank, the node's last-level cache (32 MiB here) several times over.
constexpr size_t kCacheBytes = size_t{256} << 10;
constexpr size_t kMemoryBytes = size_t{32} << 20;
constexpr int kBarriersPerBlock = 200;
// Ring-step exchange sizes: alpha from the small ones, beta from the large ones.
constexpr size_t kRingMaxBytes = size_t{8} << 20;
constexpr size_t kRingSmallMax = size_t{4} << 10;
constexpr size_t kRingLargeMin = size_t{1} << 20;
// The algorithms' largest timed size: Open MPI's all-reduce collapses from 32 MiB with default
// malloc settings (docs/machine-notes.md 2), which no training step should be judged by.
constexpr size_t kAlgorithmMaxBytes = size_t{16} << 20;

// One pair's ping-pong: sizes 8 B .. 2 MiB (x4), one-way median per size (valid on rank a).
struct PingPong {
  std::vector<double> bytes;
  std::vector<double> one_way_us;
  LineFit fit;
};

std::vector<size_t> PingPongSizes() {
  std::vector<size_t> sizes;
  for (size_t s = 8; s <= (size_t{2} << 20); s *= 4) sizes.push_back(s);
  return sizes;
}

// Round trips per block: ~2 MiB moved per block, between 2 and 100.
int RoundTrips(size_t bytes) {
  return static_cast<int>(std::clamp<size_t>((size_t{1} << 21) / std::max<size_t>(bytes, 4096),
                                             2, 100));
}

// One timed block: a warm-up call, a barrier (the ranks start together), then `calls` calls;
// returns this rank's microseconds per call.
double TimedBlock(const World& world, Communicator& comm, int calls,
                  const std::function<void()>& call) {
  call();
  const Status b = comm.Barrier();
  if (!b.ok()) Fail(world, "barrier before a timed block: " + b.ToString());
  const double start = NowSeconds();
  for (int c = 0; c < calls; ++c) call();
  return (NowSeconds() - start) * 1e6 / calls;
}

void Exchange(const World& world, Communicator& comm, bool send_first, void* buffer, size_t bytes,
              int peer) {
  for (int leg = 0; leg < 2; ++leg) {
    const bool send = (leg == 0) == send_first;
    const P2POp op = send ? P2POp::Send(buffer, bytes, peer, 0) : P2POp::Recv(buffer, bytes, peer, 0);
    StatusOr<std::unique_ptr<P2PBatch>> batch = comm.Start({op});
    Status s = batch.ok() ? (*batch)->Wait() : batch.status();
    if (!s.ok()) Fail(world, "ping-pong with rank " + std::to_string(peer) + ": " + s.ToString());
  }
}

// Both ranks of a pair send `bytes` to each other at once (the time of one is the one-way time
// with the link busy both ways, as in a ring or a recursive-doubling step).
void SwapBothWays(const World& world, Communicator& comm, void* send, void* recv, size_t bytes,
                  int peer) {
  StatusOr<std::unique_ptr<P2PBatch>> batch =
      comm.Start({P2POp::Send(send, bytes, peer, 1), P2POp::Recv(recv, bytes, peer, 1)});
  Status s = batch.ok() ? (*batch)->Wait() : batch.status();
  if (!s.ok()) Fail(world, "exchange with rank " + std::to_string(peer) + ": " + s.ToString());
}

// Collective over world: each pair (a, b) ping-pongs (or, with `recv`, swaps both ways), all
// pairs at once; the others wait. The result (on the first pair's first rank) is, per size,
// the slowest rank's median: a pair that pulls ahead finishes its last trips alone and fast,
// so its own time understates what each pair gets while all of them cross (two pairs on one
// 1 Gbit/s link read 0.06-0.09 GB/s each from run to run, where the link carries 0.0625 each),
// and a step of recursive doubling or halving ends when its slowest pair does.
PingPong MeasurePingPongs(const World& world, Communicator& comm,
                          const std::vector<std::pair<int, int>>& pairs, int repeats,
                          const Buffer& buffer, const Buffer* recv = nullptr) {
  PingPong result;
  const std::vector<size_t> sizes = PingPongSizes();
  std::vector<std::vector<double>> samples(sizes.size());
  int peer = -1;
  bool first = false;
  for (const auto& [a, b] : pairs) {
    if (world.rank == a || world.rank == b) {
      peer = world.rank == a ? b : a;
      first = world.rank == a;
    }
  }
  const int a = pairs.front().first;
  // A lone pair aligns with a trip of its own; several start together from a barrier of all
  // ranks (each pair's own alignment trip would start its clock only once the pairs ahead of
  // it let its first message through).
  const bool together = pairs.size() > 1;
  for (int r = 0; r < repeats; ++r) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      // Alternate the order of the sizes between repeats, so drift favours none.
      const size_t i = r % 2 == 0 ? k : sizes.size() - 1 - k;
      const int trips = RoundTrips(sizes[i]);
      const auto trip = [&] {
        if (recv != nullptr) {
          SwapBothWays(world, comm, buffer.data(), recv->data(), sizes[i], peer);
        } else {
          Exchange(world, comm, first, buffer.data(), sizes[i], peer);
        }
      };
      if (together) {
        Barrier(world);
      } else if (peer >= 0) {
        trip();  // align
      }
      if (peer < 0) continue;
      const double start = NowSeconds();
      for (int t = 0; t < trips; ++t) trip();
      // A ping-pong's trip is two one-way times; a swap's is one.
      samples[i].push_back((NowSeconds() - start) * 1e6 / ((recv ? 1.0 : 2.0) * trips));
    }
  }
  std::vector<double> medians(sizes.size(), 0.0);
  if (peer >= 0) {
    for (size_t i = 0; i < sizes.size(); ++i) medians[i] = Median(samples[i]);
  }
  medians = MaxOverRanks(world, medians);
  if (world.rank != a) return result;
  std::vector<double> weights;
  for (size_t i = 0; i < sizes.size(); ++i) {
    result.bytes.push_back(static_cast<double>(sizes[i]));
    result.one_way_us.push_back(medians[i]);
    weights.push_back(1.0 / std::max(1e-3, result.one_way_us.back()));
  }
  result.fit = FitLine(result.bytes, result.one_way_us, weights);
  return result;
}

PingPong MeasurePingPong(const World& world, Communicator& comm, int a, int b, int repeats,
                         const Buffer& buffer) {
  return MeasurePingPongs(world, comm, {{a, b}}, repeats, buffer);
}

LinkCost ToLink(const PingPong& p) {
  LinkCost link;
  link.alpha_us = std::max(0.0, p.fit.intercept);
  link.beta_us = std::max(1e-9, p.fit.slope);
  return link;
}

// Collective over `comm`: every rank sends m bytes to the next rank and receives m from the
// previous one at the same time (one step of a ring all-reduce), m = 8 B .. 8 MiB (x4); the
// time of a step is the max over ranks of the median of -R blocks. alpha = the fit of the small
// steps' intercept (<= 4 KiB), beta = the fit of the large steps' slope (>= 1 MiB): large
// messages are what beta prices, and they pay MPI's shared-memory transport copies past the
// caches, with every rank of the node busy (more ranks than cores included).
LinkCost MeasureRingStep(const World& world, Communicator& comm, int repeats, const Buffer& send,
                         const Buffer& recv, const std::function<void(const std::string&)>& out) {
  const int p = comm.Size(), me = comm.Rank();
  const int next = (me + 1) % p, prev = (me + p - 1) % p;
  std::vector<size_t> sizes;
  for (size_t m = 8; m <= kRingMaxBytes; m *= 4) sizes.push_back(m);
  std::vector<std::vector<double>> samples(sizes.size());
  const auto step = [&](size_t m) {
    StatusOr<std::unique_ptr<P2PBatch>> batch =
        comm.Start({P2POp::Recv(recv.data(), m, prev, 1), P2POp::Send(send.data(), m, next, 1)});
    Status st = batch.ok() ? (*batch)->Wait() : batch.status();
    if (!st.ok()) Fail(world, "ring step: " + st.ToString());
  };
  for (int r = 0; r < repeats; ++r) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      const size_t i = r % 2 == 0 ? k : sizes.size() - 1 - k;
      samples[i].push_back(TimedBlock(world, comm, RoundTrips(sizes[i]), [&] { step(sizes[i]); }));
    }
  }
  std::vector<double> medians;
  for (const auto& s : samples) medians.push_back(Median(s));
  medians = MaxOverRanks(world, medians);
  std::vector<double> small_x, small_y, large_x, large_y;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] <= kRingSmallMax) small_x.push_back(sizes[i]), small_y.push_back(medians[i]);
    if (sizes[i] >= kRingLargeMin) large_x.push_back(sizes[i]), large_y.push_back(medians[i]);
  }
  const LineFit small = FitLine(small_x, small_y, std::vector<double>(small_x.size(), 1.0));
  const LineFit large = FitLine(large_x, large_y, std::vector<double>(large_x.size(), 1.0));
  LinkCost link;
  link.alpha_us = std::max(0.0, small.intercept);
  link.beta_us = std::max(1e-9, large.slope);
  char line[160];
  out("intra: ring step among the node's " + std::to_string(p) +
      " ranks (send to next, receive from previous, all at once), max over ranks of the median:");
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::snprintf(line, sizeof line, "  %9zu B  %10.2f us   model %10.2f us", sizes[i],
                  medians[i], link.alpha_us + link.beta_us * static_cast<double>(sizes[i]));
    out(line);
  }
  return link;
}

// Every host all-reduce algorithm of the registry that supports this layout (MPI's own among
// them, as "mpi"), float32 sum on the bench communicator, 4 KiB .. 16 MiB (x4), blocks
// interleaved across algorithms and sizes over `repeats` rounds, max over ranks of the median.
// Only where every node has the same number of ranks: the layout is what the selector matches
// the timings by (collectives/select/measured_estimate.h). `shm_stores`: KOLO_SHM_STORES's word.
MeasuredAllreduce MeasureAlgorithms(const World& world, Communicator& comm, int repeats,
                                    const std::string& shm_stores,
                                    const std::function<void(const std::string&)>& out) {
  MeasuredAllreduce m;
  const SelectionInput layout = DescribeCommunicator(comm);
  if (layout.max_local_size != layout.min_local_size || comm.Size() < 2) {
    out("algorithms: not timed (nodes of unequal sizes, or one rank)");
    return m;
  }
  std::vector<size_t> sizes;
  for (size_t s = size_t{4} << 10; s <= kAlgorithmMaxBytes; s *= 4) sizes.push_back(s);
  // The host algorithms that support every size timed: the file holds one time per size for
  // each algorithm it names.
  const AllreduceSelector selector("", CostModel(), "", shm_stores);
  std::vector<AllreduceAlgorithm*> algorithms;
  for (const auto& [algo, us] : selector.Rank(layout)) {
    bool all = algo->memory() == MemoryKind::kHost;
    for (size_t bytes : sizes) {
      SelectionInput in = layout;
      in.bytes = bytes;
      in.count = bytes / 4;
      in.cost = &selector.cost();
      all = all && algo->Supports(in).ok();
    }
    if (all) algorithms.push_back(algo);
  }
  const Buffer send(world, kAlgorithmMaxBytes, "an algorithm's buffer");
  const Buffer recv(world, kAlgorithmMaxBytes, "an algorithm's buffer");
  std::memset(send.data(), 0, kAlgorithmMaxBytes);  // zeros: no overflow, no NaN, however many sums
  const auto call = [&](AllreduceAlgorithm* algo, size_t bytes) {
    AllreduceArgs args;
    args.send = send.data();
    args.recv = recv.data();
    args.count = bytes / 4;
    args.dtype = DataType::kFloat32;
    args.op = ReduceOp::kSum;
    const Status s = algo->Run(comm, args);
    if (!s.ok()) Fail(world, std::string(algo->Name()) + ": " + s.ToString());
  };
  // samples[a][i]: algorithm a at sizes[i].
  std::vector<std::vector<std::vector<double>>> samples(
      algorithms.size(), std::vector<std::vector<double>>(sizes.size()));
  for (int r = 0; r < repeats; ++r) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      const size_t i = r % 2 == 0 ? k : sizes.size() - 1 - k;
      for (size_t j = 0; j < algorithms.size(); ++j) {
        const size_t a = (j + static_cast<size_t>(r)) % algorithms.size();
        samples[a][i].push_back(
            TimedBlock(world, comm, RoundTrips(sizes[i]), [&] { call(algorithms[a], sizes[i]); }));
      }
    }
  }
  m.backend = std::string(comm.BackendName());
  m.ranks = comm.Size();
  m.nodes = layout.nodes;
  m.local_size = layout.max_local_size;
  for (size_t bytes : sizes) m.bytes.push_back(static_cast<double>(bytes));
  out("algorithms (float32 sum, " + std::to_string(m.nodes) + " node(s) of " +
      std::to_string(m.local_size) + "), max over ranks of the median, us:");
  std::string header = "  size      ";
  for (AllreduceAlgorithm* algo : algorithms) {
    char name[24];
    std::snprintf(name, sizeof name, " %12s", std::string(algo->Name()).c_str());
    header += name;
  }
  out(header);
  std::vector<std::vector<double>> medians(algorithms.size());
  for (size_t a = 0; a < algorithms.size(); ++a) {
    for (const auto& s : samples[a]) medians[a].push_back(Median(s));
    medians[a] = MaxOverRanks(world, medians[a]);
    m.micros[std::string(algorithms[a]->Name())] = medians[a];
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    char cell[24];
    std::snprintf(cell, sizeof cell, "  %9zu B", sizes[i]);
    std::string line = cell;
    for (size_t a = 0; a < algorithms.size(); ++a) {
      std::snprintf(cell, sizeof cell, " %12.2f", medians[a][i]);
      line += cell;
    }
    out(line);
  }
  return m;
}

// The last-level cache of cpu0 as Linux's sysfs reports it (bytes), or -1. Not sysconf: glibc's
// _SC_LEVEL3_CACHE_SIZE says 320 MiB for this VM's 32 MiB L3.
double LastLevelCacheBytes() {
  double best = -1;
  for (int index = 0; index < 8; ++index) {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) +
                     "/size");
    double value = 0;
    std::string unit;
    if (!(in >> value)) break;
    in.clear();
    std::getline(in, unit);
    const double scale = unit.find('M') != std::string::npos   ? 1 << 20
                         : unit.find('K') != std::string::npos ? 1 << 10
                                                               : 1;
    best = std::max(best, value * scale);
  }
  return best;
}

std::string MeasuredText(const World& world, int nodes) {
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return std::string(date) + " on " + world.host + ", " + std::to_string(world.size) +
         " ranks, " + std::to_string(nodes) + " node(s)";
}

}  // namespace

int RunCalibration(const World& world, const CalibrateOptions& options) {
  const auto out = [&](const std::string& line) {
    if (world.rank == 0) std::printf("# %s\n", line.c_str());
    if (world.rank == 0) std::fflush(stdout);
  };
  std::unique_ptr<MpiCommunicator> comm = MakeBenchCommunicator(world, size_t{16} << 20);
  const NodeMap map = comm->node() != nullptr ? comm->node()->map : NodeMap::OneNode(world.size);
  int intra_peer = -1, inter_peer = -1;
  for (int r = 1; r < world.size; ++r) {
    const bool same = map.node_of_rank[r] == map.node_of_rank[0];
    if (same && intra_peer < 0) intra_peer = r;
    if (!same && inter_peer < 0) inter_peer = r;
  }
  out("calibration: " + std::to_string(world.size) + " ranks, nodes " + map.Describe());

  CostModel model;  // the defaults, replaced by what is measured
  const Buffer wire(world, size_t{2} << 20, "the ping-pong buffer");
  Communicator& node_comm =
      comm->node() != nullptr && comm->node()->local ? *comm->node()->local : *comm;
  char line[256];
  // intra: a ring step among the ranks of rank 0's node (every node runs one; rank 0's counts).
  {
    const Buffer send(world, kRingMaxBytes, "a ring-step buffer");
    const Buffer recv(world, kRingMaxBytes, "a ring-step buffer");
    if (node_comm.Size() >= 2) {
      model.intra = MeasureRingStep(world, node_comm, options.repeats, send, recv, out);
      std::snprintf(line, sizeof line, "intra: alpha %.3f us (steps <= %zu B), beta %.3g us/B "
                    "(%.2f GB/s, steps >= %zu B)", model.intra.alpha_us, kRingSmallMax,
                    model.intra.beta_us, 1e-3 / model.intra.beta_us, kRingLargeMin);
      out(line);
    }
    Barrier(world);
  }
  // inter: ping-pong between rank 0 and a rank of another node.
  if (inter_peer >= 0) {
    const PingPong p = MeasurePingPong(world, *comm, 0, inter_peer, options.repeats, wire);
    if (world.rank == 0) {
      out("inter: ping-pong rank 0 <-> rank " + std::to_string(inter_peer) +
          ", one-way time (median of " + std::to_string(options.repeats) + "):");
      for (size_t i = 0; i < p.bytes.size(); ++i) {
        std::snprintf(line, sizeof line, "  %9.0f B  %10.2f us   fit %10.2f us", p.bytes[i],
                      p.one_way_us[i], p.fit.intercept + p.fit.slope * p.bytes[i]);
        out(line);
      }
      model.inter = ToLink(p);
      std::snprintf(line, sizeof line, "inter: alpha %.3f us, beta %.3g us/B (%.2f GB/s), r2 %.4f",
                    model.inter.alpha_us, model.inter.beta_us, 1e-3 / model.inter.beta_us,
                    p.fit.r2);
      out(line);
    }
    // The same with every local rank of rank 0's node paired with its counterpart on the other
    // node, all at once: each rank's share of its node's NIC (what `inter` means to the
    // algorithms whose ranks all cross at once), and how many divide it (inter_sharing). With
    // one rank per node the lone pair swaps: a swap loads both directions of one connection,
    // as every step of recursive doubling and halving does; on the shaped links it ran 2.1-2.2x
    // slower than the ping-pong's one direction at a time with Open MPI's TCP `put` protocol,
    // 1.16x without it (collectives/mpi/tcp_defaults.h, docs/benchmarks.md).
    std::vector<std::pair<int, int>> pairs;
    const int there = map.node_of_rank[inter_peer];
    for (int r = 0; r < world.size; ++r) {
      if (map.node_of_rank[r] != map.node_of_rank[0]) continue;
      for (int q = 0; q < world.size; ++q) {
        if (map.node_of_rank[q] == there && map.local_rank_of[q] == map.local_rank_of[r]) {
          pairs.emplace_back(r, q);
        }
      }
    }
    std::sort(pairs.begin(), pairs.end());  // rank 0's pair first: it reports
    if (!pairs.empty()) {
      // Swaps both ways, so that every pair loads both directions at once (ping-pongs drift
      // apart and take turns). Against the lone pair's ping-pong: with Open MPI's TCP `put`
      // protocol (before kolo left it out) a lone pair swapping both ways measured from 0.06 to
      // 0.12 GB/s on the same 1 Gbit/s link from run to run, its ping-pong 0.13-0.14 every
      // time. inter_sharing is the ratio as measured, not capped at the number of pairs: two
      // pairs swapping over 1 Gbit/s links got 0.05 GB/s each, not the 0.07 an even split of
      // the ping-pong's rate gives (2.63-2.78 in three runs, with `put`; 2.09-2.33 without),
      // and the capped value left recursive doubling, Rabenseifner and hierarchical's
      // cross-node step 1.5x faster in the model than measured (docs/benchmarks.md, "Across
      // nodes"). The ring's one flow per node gets the lone pair's swap rate,
      // inter / inter_sharing x inter_duplex (RingLink); a tree's only where its node's link
      // carries edges both ways in a phase (TreeLink), else the ping-pong's, inter /
      // inter_sharing.
      const Buffer back(world, size_t{2} << 20, "the swap buffer");
      const PingPong all = MeasurePingPongs(world, *comm, pairs, options.repeats, wire, &back);
      // And rank 0's pair swapping alone: one flow each way on the link, as a ring's or a
      // double binary tree's step loads it (inter_duplex). With one rank per node that is `all`.
      const PingPong lone = pairs.size() == 1 ? all
                                              : MeasurePingPongs(world, *comm, {pairs.front()},
                                                                 options.repeats, wire, &back);
      if (world.rank == 0) {
        const double one = model.inter.beta_us, shared = ToLink(all).beta_us;
        const double duplex = ToLink(lone).beta_us;
        model.inter_duplex = std::max(1.0, one > 0 ? duplex / one : 1.0);
        std::snprintf(line, sizeof line,
                      "inter, 1 pair swapping both ways alone: %.2f GB/s per direction against "
                      "the ping-pong's %.2f: inter_duplex %.2f",
                      1e-3 / duplex, 1e-3 / one, model.inter_duplex);
        out(line);
        model.inter_sharing = std::max(1.0, one > 0 ? shared / one : 1.0);
        model.inter.beta_us *= model.inter_sharing;
        std::snprintf(line, sizeof line,
                      "inter, %zu pair%s swapping both ways at once: %.2f GB/s per rank against "
                      "the lone ping-pong's %.2f: inter_sharing %.2f, inter beta %.3g us/B "
                      "(%.2f GB/s per rank)",
                      pairs.size(), pairs.size() == 1 ? "" : "s", 1e-3 / shared, 1e-3 / one,
                      model.inter_sharing, model.inter.beta_us, 1e-3 / model.inter.beta_us);
        out(line);
      }
    }
  }
  if (world.size < 2) {
    out("one rank: no point-to-point to measure; intra and inter keep the defaults");
  } else if (inter_peer < 0) {
    model.inter = model.intra;
    out("one node: inter = intra (set KOLO_NODE_GROUPING, e.g. 2x2, to measure across 'nodes')");
  } else if (intra_peer < 0) {
    model.intra = model.inter;
    out("rank 0 is alone on its node: intra = inter (measured across nodes)");
  } else {
    out("ranks 0 and " + std::to_string(inter_peer) +
        " are on different nodes: inter measured between them" +
        (std::getenv("KOLO_NODE_GROUPING") != nullptr
             ? " (by KOLO_NODE_GROUPING; on one host the transport is the same as intra)"
             : ""));
  }

  // Memory: reduce and copy in cache, copy past the caches, every rank at once, interleaved;
  // sync: the shared-memory algorithm's flag barrier (its one-barrier path on one element, so
  // the figure is the barrier plus a few cache lines), else the node's MPI_Barrier.
  const Buffer a(world, kMemoryBytes, "a calibration buffer");
  const Buffer b(world, kMemoryBytes, "a calibration buffer");
  const bool shm = comm->node() != nullptr && comm->node()->shm_capable && node_comm.Size() >= 2;
  ShmNodeReducer reducer;
  float one_in = 1, one_out = 0;
  AllreduceArgs tiny;
  tiny.send = &one_in;
  tiny.recv = &one_out;
  tiny.count = 1;
  tiny.dtype = DataType::kFloat32;
  tiny.op = ReduceOp::kSum;
  std::vector<double> reduce_us, copy_us, copy_mem_us, sync_us;
  constexpr int kInCacheReps = 32;
  for (int r = 0; r < options.repeats + 1; ++r) {  // the first round warms up
    Barrier(world);
    double start = NowSeconds();
    for (int i = 0; i < kInCacheReps; ++i) {
      const Status s = ReduceInto(a.data(), b.data(), kCacheBytes / 4, DataType::kFloat32,
                                  ReduceOp::kSum);
      if (!s.ok()) Fail(world, "ReduceInto: " + s.ToString());
    }
    const double reduce = (NowSeconds() - start) * 1e6 / kInCacheReps;
    Barrier(world);
    start = NowSeconds();
    for (int i = 0; i < kInCacheReps; ++i) std::memcpy(a.data(), b.data(), kCacheBytes);
    const double copy = (NowSeconds() - start) * 1e6 / kInCacheReps;
    Barrier(world);
    start = NowSeconds();
    std::memcpy(a.data(), b.data(), kMemoryBytes);
    const double copy_mem = (NowSeconds() - start) * 1e6;
    Barrier(world);
    start = NowSeconds();
    for (int i = 0; i < kBarriersPerBlock; ++i) {
      const Status bs = shm ? reducer.RunSmall(node_comm, tiny) : node_comm.Barrier();
      if (!bs.ok()) Fail(world, "node barrier: " + bs.ToString());
    }
    const double sync = (NowSeconds() - start) * 1e6 / kBarriersPerBlock;
    if (r == 0) continue;
    reduce_us.push_back(reduce);
    copy_us.push_back(copy);
    copy_mem_us.push_back(copy_mem);
    sync_us.push_back(sync);
  }
  const std::vector<double> slowest = MaxOverRanks(
      world, {Median(reduce_us), Median(copy_us), Median(copy_mem_us), Median(sync_us)});
  model.gamma_us = slowest[0] / kCacheBytes;
  model.copy_us = slowest[1] / kCacheBytes;
  model.copy_mem_us = slowest[2] / kMemoryBytes;
  model.sync_us = slowest[3];
  const double llc = LastLevelCacheBytes();
  if (llc > 0) model.cache_bytes = llc;
  std::snprintf(line, sizeof line,
                "in cache (%zu KiB): gamma %.3g us/B (ReduceInto float32 sum, %.2f GB/s), copy "
                "%.3g us/B (%.2f GB/s); past the caches (%zu MiB): copy %.3g us/B (%.2f GB/s)",
                kCacheBytes >> 10, model.gamma_us, 1e-3 / model.gamma_us, model.copy_us,
                1e-3 / model.copy_us, kMemoryBytes >> 20, model.copy_mem_us,
                1e-3 / model.copy_mem_us);
  out(line);
  std::snprintf(line, sizeof line, "sync %.2f us (%s); cache %.0f MiB (%s); max over ranks",
                model.sync_us, shm ? "shm flag barrier, one-barrier path on 1 float" :
                                     "node MPI_Barrier: no shared memory",
                model.cache_bytes / (1 << 20), llc > 0 ? "last level, sysfs" : "default");
  out(line);
  model.measured_allreduce =
      MeasureAlgorithms(world, *comm, options.repeats, options.shm_stores, out);
  model.measured = MeasuredText(world, map.nodes());

  int status = 0;
  if (world.rank == 0) {
    const Status saved = model.Save(options.output);
    if (saved.ok()) {
      out("wrote " + options.output + " (use it: KOLO_TUNING_FILE=" + options.output + ")");
      std::printf("%s\n", model.ToJson().c_str());
    } else {
      std::fprintf(stderr, "kolo-bench: %s\n", saved.ToString().c_str());
      status = 1;
    }
  }
  int any = 0;
  CheckMpi(world, MPI_Allreduce(&status, &any, 1, MPI_INT, MPI_MAX, world.comm),
           "MPI_Allreduce(status)");
  return any;
}

}  // namespace kolo::bench
