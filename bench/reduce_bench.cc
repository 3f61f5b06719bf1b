// Throughput of the host reduction kernels (collectives/reduce.h) at 64 KiB (L2-resident),
// 1 MiB and 16 MiB (past L2; L3- or DRAM-bound depending on the machine). The byte count is the
// tensor's size in its own dtype (what an all-reduce calls the message size), so GB/s compares
// with algbw; memory traffic is larger: ReduceInto reads two buffers and writes one,
// WidenToFloat32 writes twice the bytes it reads. The simd:0 rows force the baseline loops (what
// a CPU without AVX2/F16C, or a non-x86 one, runs).
//
// Every dtype x op of ReduceInto has a row (ReduceKernel/<dtype>/<op>), with a `traffic`
// counter (bytes read + written per second) to hold against the Memcpy and AddFloat32Plain
// rows, which are what the memory system gives a plain loop here.
//
// Link Google Benchmark without benchmark_main: this file has its own BENCHMARK_MAIN.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
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

// Page-aligned buffers for the rows that memcpy: two vectors allocated one after the other sit
// 16 bytes apart in their pages, where glibc's memcpy runs 15-20x slower on this machine
// (docs/machine-notes.md 14), which would time that instead of the copy.
template <typename T>
class PageBuffer {
 public:
  PageBuffer(size_t n, T value)
      : data_(static_cast<T*>(std::aligned_alloc(4096, RoundUpPage(n * sizeof(T))))), n_(n) {
    std::fill(data_, data_ + n_, value);
  }
  ~PageBuffer() { std::free(data_); }
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;
  T* data() { return data_; }
  size_t size() const { return n_; }

 private:
  static size_t RoundUpPage(size_t bytes) { return (bytes + 4095) / 4096 * 4096; }
  T* data_;
  size_t n_;
};

class SimdScope {
 public:
  explicit SimdScope(bool simd) { internal::SetSimdEnabledForTesting(simd); }
  ~SimdScope() { internal::SetSimdEnabledForTesting(true); }
};

// Every row's figures: `bytes` of tensor data per iteration (bytes_per_second), and `traffic`
// bytes read plus written per iteration (the `traffic` rate the yardstick rows compare with).
void Report(benchmark::State& state, size_t bytes, size_t traffic) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.counters["traffic"] = benchmark::Counter(static_cast<double>(traffic),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

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

// The memory-bandwidth yardsticks: memcpy (read n, write n) and c = a + b as plain scalar code
// the compiler vectorises (read 2n, write n, the traffic of ReduceInto). Every kernel's
// `traffic` counter (bytes read + written per second) compares with these rows' on the same
// machine in the same run.
void Memcpy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  PageBuffer<char> src(bytes, 1), dst(bytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::ClobberMemory();
  }
  Report(state, bytes, 2 * bytes);
}

void AddFloat32Plain(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0)) / sizeof(float);
  std::vector<float> a(n, 1.0f), b(n, 1e-30f);
  for (auto _ : state) {
    float* __restrict pa = a.data();
    const float* __restrict pb = b.data();
    for (size_t i = 0; i < n; ++i) pa[i] += pb[i];
    benchmark::ClobberMemory();
  }
  Report(state, n * sizeof(float), 3 * n * sizeof(float));
}

// shm's reduction of two operands: what it did (a copy of the first operand, then ReduceInto,
// then a copy of the result into the output: 4n read, 3n written for two operands of n bytes)
// against ReducePair with the output stored alongside (2n read, 2n written). Args {bytes, simd}.
void PairCopyReduceCopy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  SimdScope simd(state.range(1) != 0);
  const size_t n = bytes / sizeof(float);
  PageBuffer<float> a(n, 1.0f), b(n, 1e-30f), result(n, 0.0f), out(n, 0.0f);
  for (auto _ : state) {
    std::memcpy(result.data(), a.data(), bytes);
    if (!ReduceInto(result.data(), b.data(), n, DataType::kFloat32, ReduceOp::kSum).ok()) {
      state.SkipWithError("ReduceInto failed");
    }
    std::memcpy(out.data(), result.data(), bytes);
    benchmark::ClobberMemory();
  }
  Report(state, bytes, 7 * bytes);
}

void PairFloat32Sum(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  SimdScope simd(state.range(1) != 0);
  const size_t n = bytes / sizeof(float);
  PageBuffer<float> a(n, 1.0f), b(n, 1e-30f), result(n, 0.0f), out(n, 0.0f);
  for (auto _ : state) {
    if (!ReducePair(result.data(), a.data(), b.data(), n, DataType::kFloat32, ReduceOp::kSum,
                    out.data())
             .ok()) {
      state.SkipWithError("ReducePair failed");
    }
    benchmark::ClobberMemory();
  }
  Report(state, bytes, 4 * bytes);
}

// ReduceInto for one dtype x op: Args {bytes, simd}. Data: ones (Product and Min/Max keep them
// ones, Sum grows them slowly), so no dtype overflows into slow paths (denormals, NaN).
void ReduceKernel(benchmark::State& state, DataType dtype, ReduceOp op) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  SimdScope simd(state.range(1) != 0);
  const size_t count = bytes / DataTypeSize(dtype);
  std::vector<char> inout(count * DataTypeSize(dtype)), in(inout.size());
  for (size_t i = 0; i < count; ++i) {
    // 1 in every dtype's encoding (0x3c00 float16, 0x3f80 bfloat16).
    switch (dtype) {
      case DataType::kFloat16: reinterpret_cast<uint16_t*>(inout.data())[i] = 0x3c00; break;
      case DataType::kBFloat16: reinterpret_cast<uint16_t*>(inout.data())[i] = 0x3f80; break;
      case DataType::kFloat32: reinterpret_cast<float*>(inout.data())[i] = 1.0f; break;
      case DataType::kFloat64: reinterpret_cast<double*>(inout.data())[i] = 1.0; break;
      default: std::memset(inout.data() + i * DataTypeSize(dtype), 0, DataTypeSize(dtype));
               inout[i * DataTypeSize(dtype)] = 1;
    }
  }
  in = inout;
  for (auto _ : state) {
    if (!ReduceInto(inout.data(), in.data(), count, dtype, op).ok()) {
      state.SkipWithError("ReduceInto failed");
    }
    benchmark::ClobberMemory();
  }
  Report(state, bytes, 3 * bytes);
}

// Every dtype x op, registered at start-up (names like ReduceKernel/int8/max).
const bool kRegistered = [] {
  const DataType dtypes[] = {DataType::kUInt8,   DataType::kInt8,     DataType::kUInt16,
                             DataType::kInt16,   DataType::kInt32,    DataType::kInt64,
                             DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
                             DataType::kFloat64, DataType::kBool};
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct};
  for (DataType t : dtypes) {
    for (ReduceOp op : ops) {
      const std::string name = "ReduceKernel/" + std::string(DataTypeName(t)) + "/" +
                               std::string(ReduceOpName(op));
      benchmark::RegisterBenchmark(name.c_str(), ReduceKernel, t, op)->Apply(Sizes);
    }
  }
  return true;
}();

BENCHMARK(Memcpy)->ArgName("bytes")->Arg(64 << 10)->Arg(1 << 20)->Arg(16 << 20);
BENCHMARK(AddFloat32Plain)->ArgName("bytes")->Arg(64 << 10)->Arg(1 << 20)->Arg(16 << 20);
BENCHMARK(ReduceFloat32Sum)->Apply(Sizes);
BENCHMARK(PairCopyReduceCopy)->Apply(Sizes);
BENCHMARK(PairFloat32Sum)->Apply(Sizes);
BENCHMARK(ReduceFloat16Sum)->Apply(Sizes);
BENCHMARK(WidenFloat16)->Apply(Sizes);
BENCHMARK(ScaleFloat32)->Apply(Sizes);

}  // namespace
}  // namespace kolo

BENCHMARK_MAIN();
