// kolo-core-probe: how fast two cores hand each other cache lines, the one thing that tells
// this machine's fast state from its slow state (docs/machine-notes.md 11).
//
// Two threads, pinned to two CPUs (the first two of the process's affinity mask unless --cpus
// says otherwise), measure:
//   pingpong_ns     a cache line passed back and forth with acquire/release stores: the time of
//                   one hand-over, half a round trip (median of 5 blocks of 20,000 round trips)
//   cross_read_gbs  one thread reads a 2 MiB buffer that the other thread has just written: the
//                   bytes a shared-memory all-reduce moves between cores (median of 15 reads)
//   local_read_gbs  the same read right after the reading thread wrote the buffer itself: the
//                   baseline the cross-core read is held against
//   handoff_plain_gbs, handoff_streamed_gbs
//                   1 MiB handed over in lock-step, written with memcpy or with StreamCopy
//                   (streaming stores), then copied out by the other CPU: the shm all-reduce's
//                   slots. In the slow state plain falls to ~2 GB/s and streamed keeps ~10
// On a VM whose two vCPUs sometimes sit behind separate last-level caches (AMD EPYC: one L3 per
// CCD) pingpong_ns jumps from ~30-50 to ~200-240 and cross_read_gbs falls to a third of
// local_read_gbs; scripts/bench_performance.sh labels each of its rounds with this.
//
// Prints one line of "name value" pairs (and with --json, one JSON object). Runs ~0.2 s.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "collectives/host/stream_copy.h"

namespace {

using Clock = std::chrono::steady_clock;

bool Pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Half a round trip of one cache line between the two CPUs, in ns.
double PingPongNs(int cpu_a, int cpu_b) {
  constexpr int kTrips = 20000;
  constexpr int kBlocks = 5;
  alignas(64) std::atomic<int> line{0};
  std::thread peer([&] {
    Pin(cpu_b);
    for (int i = 0; i < kTrips * kBlocks; ++i) {
      while (line.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      line.store(2 * i + 2, std::memory_order_release);
    }
  });
  Pin(cpu_a);
  std::vector<double> blocks;
  for (int b = 0; b < kBlocks; ++b) {
    const auto start = Clock::now();
    for (int t = 0; t < kTrips; ++t) {
      const int i = b * kTrips + t;
      line.store(2 * i + 1, std::memory_order_release);
      while (line.load(std::memory_order_acquire) != 2 * i + 2) {
      }
    }
    blocks.push_back(std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
                     kTrips / 2);
  }
  peer.join();
  return Median(blocks);
}

// Reads every cache line of `buf` once (one 8-byte load each); returns seconds.
double ReadSeconds(const std::vector<uint64_t>& buf, volatile uint64_t* sink) {
  const auto start = Clock::now();
  uint64_t acc = 0;
  for (size_t i = 0; i < buf.size(); i += 8) acc += buf[i];
  *sink = *sink + acc;
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// GB/s of reading a 2 MiB buffer written by the other CPU (cross) and by the reader (local).
void ReadRates(int cpu_a, int cpu_b, double* cross_gbs, double* local_gbs) {
  constexpr size_t kBytes = 2 << 20;
  constexpr int kReads = 15;
  std::vector<uint64_t> buf(kBytes / 8, 1);
  std::atomic<int> turn{0};
  volatile uint64_t sink = 0;
  std::thread writer([&] {
    Pin(cpu_b);
    for (int r = 0; r < kReads; ++r) {
      while (turn.load() != 2 * r) {
      }
      std::memset(buf.data(), r, kBytes);
      turn.store(2 * r + 1);
    }
  });
  Pin(cpu_a);
  std::vector<double> cross, local;
  for (int r = 0; r < kReads; ++r) {
    turn.store(2 * r);
    while (turn.load() != 2 * r + 1) {
    }
    cross.push_back(kBytes / ReadSeconds(buf, &sink) / 1e9);
    std::memset(buf.data(), r + 1, kBytes);
    local.push_back(kBytes / ReadSeconds(buf, &sink) / 1e9);
  }
  writer.join();
  *cross_gbs = Median(cross);
  *local_gbs = Median(local);
}

// GB/s of handing 1 MiB over and over from one CPU to the other in lock-step, as the shm
// all-reduce's slots are: the writer fills a buffer the reader copied out in the round before,
// then the reader copies it out. `streamed`: the writer uses StreamCopy (what kolo's shm does
// in the slow state; collectives/host/stream_copy.h), else memcpy.
double HandoffGbs(int cpu_a, int cpu_b, bool streamed) {
  constexpr size_t kBytes = 1 << 20;
  constexpr int kRounds = 100;
  std::vector<char> src(kBytes, 1), slot(kBytes, 2), dst(kBytes, 3);
  std::atomic<int> turn{0};
  std::thread reader([&] {
    Pin(cpu_b);
    for (int r = 0; r < kRounds; ++r) {
      while (turn.load(std::memory_order_acquire) != 2 * r + 1) {
      }
      std::memcpy(dst.data(), slot.data(), kBytes);
      turn.store(2 * r + 2, std::memory_order_release);
    }
  });
  Pin(cpu_a);
  const auto start = Clock::now();
  for (int r = 0; r < kRounds; ++r) {
    if (streamed) {
      kolo::StreamCopy(slot.data(), src.data(), kBytes);
    } else {
      std::memcpy(slot.data(), src.data(), kBytes);
    }
    turn.store(2 * r + 1, std::memory_order_release);
    while (turn.load(std::memory_order_acquire) != 2 * r + 2) {
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  reader.join();
  return static_cast<double>(kBytes) * kRounds / seconds / 1e9;
}

int Usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--cpus A,B] [--json]\n", argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int cpus[2] = {-1, -1};
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json") {
      json = true;
    } else if (arg == "--cpus" && i + 1 < argc) {
      if (std::sscanf(argv[++i], "%d,%d", &cpus[0], &cpus[1]) != 2) return Usage(argv[0]);
    } else {
      return Usage(argv[0]);
    }
  }
  if (cpus[0] < 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof(set), &set);
    int found = 0;
    for (int c = 0; c < CPU_SETSIZE && found < 2; ++c) {
      if (CPU_ISSET(c, &set)) cpus[found++] = c;
    }
    if (found < 2) {
      std::fprintf(stderr, "kolo-core-probe: needs two CPUs, this process may use %d\n", found);
      return 1;
    }
  }
  if (cpus[0] == cpus[1]) {
    std::fprintf(stderr, "kolo-core-probe: --cpus names CPU %d twice\n", cpus[0]);
    return 2;
  }
  {
    // Pinning fails for a CPU outside the affinity mask: say so rather than measure one core.
    std::thread check([&] {
      if (!Pin(cpus[0]) || !Pin(cpus[1])) cpus[0] = -1;
    });
    check.join();
    if (cpus[0] < 0) {
      std::fprintf(stderr, "kolo-core-probe: cannot run on both CPUs given\n");
      return 1;
    }
  }
  const double pingpong_ns = PingPongNs(cpus[0], cpus[1]);
  double cross_gbs = 0, local_gbs = 0;
  ReadRates(cpus[0], cpus[1], &cross_gbs, &local_gbs);
  const double plain_gbs = HandoffGbs(cpus[0], cpus[1], false);
  const double streamed_gbs = HandoffGbs(cpus[0], cpus[1], true);
  if (json) {
    std::printf(
        "{\"cpus\": [%d, %d], \"pingpong_ns\": %.1f, \"cross_read_gbs\": %.1f, "
        "\"local_read_gbs\": %.1f, \"handoff_plain_gbs\": %.1f, \"handoff_streamed_gbs\": "
        "%.1f}\n",
        cpus[0], cpus[1], pingpong_ns, cross_gbs, local_gbs, plain_gbs, streamed_gbs);
  } else {
    std::printf(
        "cpus %d,%d pingpong_ns %.1f cross_read_gbs %.1f local_read_gbs %.1f "
        "handoff_plain_gbs %.1f handoff_streamed_gbs %.1f\n",
        cpus[0], cpus[1], pingpong_ns, cross_gbs, local_gbs, plain_gbs, streamed_gbs);
  }
  return 0;
}
