// Throughput of the host reduction kernels (collectives/reduce.h) at 64 KiB (L2-resident),
// 1 MiB and 16 MiB (past L2; L3- or DRAM-bound depending on the machine). The byte count is the
// tensor's size in its own dtype (what an all-reduce calls the message size), so GB/s compares
// with algbw; memory traffic is larger: ReduceInto reads two buffers and writes one,
// WidenToFloat32 writes twice the bytes it reads. The simd:0 rows force the baseline loops (what
// a CPU without AVX2/F16C, or a non-x86 one, runs).
//
// Link Google Benchmark without benchmark_main: this file has its own BENCHMARK_MAIN.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "collectives/reduce.h"
#include "collectives/reduce_internal.h"

namespace kolo {
namespace {

// Values that stay normal and finite however many times the benchmark loop adds them.
std::vector<uint16_t> HalfData(size_t n, uint16_t base) {
  std::vector<uint16_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint16_t>(base + (i % 512));
  return v;
}

class SimdScope {
 public:
  explicit SimdScope(bool simd) { internal::SetSimdEnabledForTesting(simd); }
  ~SimdScope() { internal::SetSimdEnabledForTesting(true); }
};

void ReduceFloat32Sum(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  SimdScope simd(state.range(1) != 0);
  std::vector<float> inout(bytes / sizeof(float), 1.0f), in(inout.size(), 1e-30f);
  for (auto _ : state) {
    if (!ReduceInto(inout.data(), in.data(), inout.size(), DataType::kFloat32, ReduceOp::kSum)
             .ok()) {
      state.SkipWithError("ReduceInto failed");
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

void ReduceFloat16Sum(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  SimdScope simd(state.range(1) != 0);
  std::vector<uint16_t> inout = HalfData(bytes / 2, 0x3c00);     // about 1
  const std::vector<uint16_t> in = HalfData(bytes / 2, 0x0400);  // about 2^-14: rounds away
  for (auto _ : state) {
    if (!ReduceInto(inout.data(), in.data(), inout.size(), DataType::kFloat16, ReduceOp::kSum)
             .ok()) {
      state.SkipWithError("ReduceInto failed");
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

void WidenFloat16(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  SimdScope simd(state.range(1) != 0);
  const std::vector<uint16_t> src = HalfData(bytes / 2, 0x3c00);
  std::vector<float> dst(src.size());
  for (auto _ : state) {
    WidenToFloat32(dst.data(), src.data(), src.size(), DataType::kFloat16, 1.0f);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

void ScaleFloat32(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  SimdScope simd(state.range(1) != 0);
  std::vector<float> data(bytes / sizeof(float), 1.0f);
  for (auto _ : state) {
    // In place, like a postscale; 1 + 2^-23 keeps the values normal for billions of calls.
    if (!ScaleCopy(data.data(), data.data(), data.size(), DataType::kFloat32, 1.0000001).ok()) {
      state.SkipWithError("ScaleCopy failed");
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

void Sizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"bytes", "simd"});
  for (int64_t simd : {1, 0}) {
    for (int64_t bytes : {int64_t{64} << 10, int64_t{1} << 20, int64_t{16} << 20}) {
      b->Args({bytes, simd});
    }
  }
}

BENCHMARK(ReduceFloat32Sum)->Apply(Sizes);
BENCHMARK(ReduceFloat16Sum)->Apply(Sizes);
BENCHMARK(WidenFloat16)->Apply(Sizes);
BENCHMARK(ScaleFloat32)->Apply(Sizes);

}  // namespace
}  // namespace kolo

BENCHMARK_MAIN();
