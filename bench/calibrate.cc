#include "bench/calibrate.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <ctime>
#include <tuple>
#include <vector>

#include "bench/algorithms.h"
#include "bench/stats.h"
#include "collectives/cost_model.h"
#include "collectives/node_context.h"
#include "collectives/reduce.h"

namespace kolo::bench {
namespace {

constexpr size_t kMemoryBytes = size_t{8} << 20;
constexpr int kBarriersPerBlock = 200;

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

// Collective over world: ranks a and b ping-pong, the others wait at the closing barrier.
PingPong MeasurePingPong(const World& world, Communicator& comm, int a, int b, int repeats,
                         const Buffer& buffer) {
  PingPong result;
  const std::vector<size_t> sizes = PingPongSizes();
  std::vector<std::vector<double>> samples(sizes.size());
  if (world.rank == a || world.rank == b) {
    const int peer = world.rank == a ? b : a;
    for (int r = 0; r < repeats; ++r) {
      for (size_t k = 0; k < sizes.size(); ++k) {
        // Alternate the order of the sizes between repeats, so drift favours none.
        const size_t i = r % 2 == 0 ? k : sizes.size() - 1 - k;
        const int trips = RoundTrips(sizes[i]);
        Exchange(world, comm, world.rank == a, buffer.data(), sizes[i], peer);  // align
        const double start = NowSeconds();
        for (int t = 0; t < trips; ++t) {
          Exchange(world, comm, world.rank == a, buffer.data(), sizes[i], peer);
        }
        samples[i].push_back((NowSeconds() - start) * 1e6 / (2.0 * trips));
      }
    }
  }
  Barrier(world);
  if (world.rank != a) return result;
  std::vector<double> weights;
  for (size_t i = 0; i < sizes.size(); ++i) {
    result.bytes.push_back(static_cast<double>(sizes[i]));
    result.one_way_us.push_back(Median(samples[i]));
    weights.push_back(1.0 / std::max(1e-3, result.one_way_us.back()));
  }
  result.fit = FitLine(result.bytes, result.one_way_us, weights);
  return result;
}

LinkCost ToLink(const PingPong& p) {
  LinkCost link;
  link.alpha_us = std::max(0.0, p.fit.intercept);
  link.beta_us = std::max(1e-9, p.fit.slope);
  return link;
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
  char line[256];
  for (const auto& [peer, link, name] :
       {std::tuple{intra_peer, &model.intra, "intra"}, std::tuple{inter_peer, &model.inter, "inter"}}) {
    if (peer < 0) continue;
    const PingPong p = MeasurePingPong(world, *comm, 0, peer, options.repeats, wire);
    if (world.rank != 0) continue;
    out(std::string(name) + ": ping-pong rank 0 <-> rank " + std::to_string(peer) +
        ", one-way time (median of " + std::to_string(options.repeats) + "):");
    for (size_t i = 0; i < p.bytes.size(); ++i) {
      std::snprintf(line, sizeof line, "  %9.0f B  %10.2f us   fit %10.2f us", p.bytes[i],
                    p.one_way_us[i], p.fit.intercept + p.fit.slope * p.bytes[i]);
      out(line);
    }
    *link = ToLink(p);
    std::snprintf(line, sizeof line, "%s: alpha %.3f us, beta %.3g us/B (%.2f GB/s), r2 %.4f",
                  name, link->alpha_us, link->beta_us, 1e-3 / link->beta_us, p.fit.r2);
    out(line);
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

  // Memory: reduce and copy, interleaved, every rank at once.
  const Buffer a(world, kMemoryBytes, "a calibration buffer");
  const Buffer b(world, kMemoryBytes, "a calibration buffer");
  std::vector<double> reduce_us, copy_us, sync_us;
  Communicator& node_comm =
      comm->node() != nullptr && comm->node()->local ? *comm->node()->local : *comm;
  for (int r = 0; r < options.repeats + 1; ++r) {  // the first round warms up
    Barrier(world);
    double start = NowSeconds();
    const Status s = ReduceInto(a.data(), b.data(), kMemoryBytes / 4, DataType::kFloat32,
                                ReduceOp::kSum);
    if (!s.ok()) Fail(world, "ReduceInto: " + s.ToString());
    const double reduce = (NowSeconds() - start) * 1e6;
    Barrier(world);
    start = NowSeconds();
    std::memcpy(a.data(), b.data(), kMemoryBytes);
    const double copy = (NowSeconds() - start) * 1e6;
    Barrier(world);
    start = NowSeconds();
    for (int i = 0; i < kBarriersPerBlock; ++i) {
      const Status bs = node_comm.Barrier();
      if (!bs.ok()) Fail(world, "node barrier: " + bs.ToString());
    }
    const double sync = (NowSeconds() - start) * 1e6 / kBarriersPerBlock;
    if (r == 0) continue;
    reduce_us.push_back(reduce);
    copy_us.push_back(copy);
    sync_us.push_back(sync);
  }
  const std::vector<double> slowest =
      MaxOverRanks(world, {Median(reduce_us), Median(copy_us), Median(sync_us)});
  model.gamma_us = slowest[0] / kMemoryBytes;
  model.copy_us = slowest[1] / kMemoryBytes;
  model.sync_us = slowest[2];
  std::snprintf(line, sizeof line,
                "gamma %.3g us/B (ReduceInto float32 sum, %.2f GB/s); copy %.3g us/B (memcpy, "
                "%.2f GB/s); sync %.2f us (node barrier); max over ranks",
                model.gamma_us, 1e-3 / model.gamma_us, model.copy_us, 1e-3 / model.copy_us,
                model.sync_us);
  out(line);
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
