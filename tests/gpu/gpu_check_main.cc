// kolo-gpu-check: what scripts/gpu_check.sh runs on a lent GPU besides the gtest suite, as one
// program that needs only CUDA (and NCCL for its NCCL rows), so it also builds where MPI and
// kolo's other dependencies are missing. Prints a Markdown table, one row per check:
//   - the device (name, compute capability, memory, driver);
//   - pack/unpack kernels (fusion/cuda/device_pack.h) against the host kernel, every dtype and
//     scale, poisoned outputs;
//   - pack and unpack bandwidth on the ResNet-50 gradient layout (161 float32 tensors,
//     bench/models.h) against one cudaMemcpyAsync of the same bytes (the target: >=
//     90% of the device copy bandwidth);
//   - NCCL on one rank: kolo's algorithm path (collectives/nccl/nccl_run.h) for every dtype/op
//     NCCL has, and its time against a raw ncclAllReduce + stream sync from 1 MiB to 1 GiB
//     (target <= 1.05x; the runtime's device path is not in this build yet, so this is the
//     algorithm's overhead, not the whole runtime's);
//   - an all-reduce whose one-rank result is not its input (out of place into a poisoned output,
//     times a factor: ncclRedOpCreatePreMulSum) through kolo's call and through the raw NCCL
//     calls, so a wrong result says whose it is;
//   - NCCL all-gather, all-to-all (send/recv) and reduce-scatter on one rank through kolo's
//     calls (collectives/nccl/nccl_collectives.h), every dtype (reduce-scatter: those NCCL
//     reduces), into poisoned outputs.
// Exit status: 0 when every correctness row passed (or there is no device: "skipped"), 1 else.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/models.h"
#include "collectives/communicator.h"
#include "collectives/cuda/device.h"
#include "collectives/nccl/nccl_run.h"
#include "collectives/reduce.h"
#include "fusion/cuda/device_pack.h"
#include "tests/gpu/gpu_values.h"
#include "kolo/config.h"
#if KOLO_WITH_NCCL
#include "collectives/nccl/nccl_allreduce.h"
#include "collectives/nccl/nccl_collectives.h"
#include "collectives/nccl/nccl_comm.h"
#include "collectives/nccl/nccl_lib.h"
#endif

namespace kolo {
namespace {

int g_failures = 0;

void Row(const std::string& check, const std::string& result, const std::string& detail) {
  std::printf("| %s | %s | %s |\n", check.c_str(), result.c_str(), detail.c_str());
  std::fflush(stdout);
}

std::string Fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), f, a, b, c);
  return buf;
}

// One rank, nothing to exchange: what NCCL's bootstrap needs from a kolo Communicator.
class SoloCommunicator : public Communicator {
 public:
  int Rank() const override { return 0; }
  int Size() const override { return 1; }
  std::string_view BackendName() const override { return "solo"; }
  Status Broadcast(void*, size_t, int) override { return Status::OK(); }
};

std::vector<uint8_t> Pattern(DataType dtype, size_t count, int seed) {
  return gpu_testing::PatternBytes(dtype, count, seed);
}

const DataType kDtypes[] = {DataType::kUInt8,   DataType::kInt8,     DataType::kUInt16,
                            DataType::kInt16,   DataType::kInt32,    DataType::kInt64,
                            DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
                            DataType::kFloat64, DataType::kBool};

void CheckPackCorrectness() {
  int cases = 0, bad = 0;
  const std::vector<size_t> counts = {0, 1, 7, 1000, 65537, 4096};
  for (DataType dtype : kDtypes) {
    for (double scale : {1.0, 0.5, 3.0}) {
      if (dtype == DataType::kBool && scale != 1.0) continue;
      const size_t es = DataTypeSize(dtype);
      std::vector<size_t> offsets;
      size_t total = 0;
      for (size_t c : counts) {
        offsets.push_back(total);
        total += c * es + 64;
      }
      std::vector<const void*> srcs;
      std::vector<std::vector<uint8_t>> host;
      for (size_t i = 0; i < counts.size(); ++i) {
        host.push_back(Pattern(dtype, counts[i], static_cast<int>(i)));
        void* d = nullptr;
        cudaMalloc(&d, counts[i] * es + 1);
        cudaMemcpy(d, host.back().data(), counts[i] * es, cudaMemcpyHostToDevice);
        srcs.push_back(d);
      }
      void* fused = nullptr;
      cudaMalloc(&fused, total);
      cudaMemset(fused, 0xA5, total);
      Status s = PackToFusion(srcs, counts, offsets, fused, dtype, scale, nullptr);
      std::vector<uint8_t> got(total);
      cudaMemcpy(got.data(), fused, total, cudaMemcpyDeviceToHost);
      bool ok = s.ok();
      for (size_t i = 0; ok && i < counts.size(); ++i) {
        std::vector<uint8_t> want(counts[i] * es);
        ScaleCopy(want.data(), host[i].data(), counts[i], dtype, scale).ok();
        ok = std::memcmp(got.data() + offsets[i], want.data(), want.size()) == 0;
        for (size_t g = 0; ok && g < 64; ++g) ok = got[offsets[i] + want.size() + g] == 0xA5;
      }
      ++cases;
      if (!ok) {
        ++bad;
        std::fprintf(stderr, "pack mismatch: %s x %g (%s)\n",
                     std::string(DataTypeName(dtype)).c_str(), scale, s.ToString().c_str());
      }
      for (const void* p : srcs) cudaFree(const_cast<void*>(p));
      cudaFree(fused);
    }
  }
  g_failures += bad;
  Row("pack kernels vs host ScaleCopy", bad == 0 ? "PASS" : "FAIL",
      std::to_string(cases - bad) + "/" + std::to_string(cases) +
          " dtype x scale cases, 6 tensors each, gaps poisoned");
}

template <typename F>
double MedianMs(F&& f, int reps = 20) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> ms;
  for (int i = 0; i < reps + 3; ++i) {
    cudaEventRecord(a, nullptr);
    f();
    cudaEventRecord(b, nullptr);
    cudaEventSynchronize(b);
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    if (i >= 3) ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void CheckPackBandwidth() {
  const bench::ModelLayout model = bench::ResNet50();
  std::vector<size_t> counts, offsets;
  size_t total = 0;
  for (const auto& t : model.tensors) {
    counts.push_back(static_cast<size_t>(t.NumElements()));
    offsets.push_back(total * sizeof(float));
    total += counts.back();
  }
  const size_t bytes = total * sizeof(float);
  float* grads = nullptr;
  float* fused = nullptr;
  float* copy = nullptr;
  cudaMalloc(&grads, bytes);
  cudaMalloc(&fused, bytes);
  cudaMalloc(&copy, bytes);
  cudaMemset(grads, 0, bytes);
  std::vector<const void*> tensors;
  std::vector<void*> outs;
  for (size_t i = 0; i < counts.size(); ++i) {
    tensors.push_back(grads + offsets[i] / sizeof(float));
    outs.push_back(grads + offsets[i] / sizeof(float));
  }
  const double memcpy_ms =
      MedianMs([&] { cudaMemcpyAsync(copy, grads, bytes, cudaMemcpyDeviceToDevice, nullptr); });
  const double pack_ms = MedianMs(
      [&] { PackToFusion(tensors, counts, offsets, fused, DataType::kFloat32, 0.5, nullptr).ok(); });
  const double unpack_ms = MedianMs([&] {
    UnpackFromFusion(fused, offsets, outs, counts, DataType::kFloat32, 2.0, nullptr).ok();
  });
  const double gbs = 2.0 * bytes / 1e6;  // read + write, GB/s per ms
  const double pack_frac = memcpy_ms / pack_ms, unpack_frac = memcpy_ms / unpack_ms;
  Row("pack bandwidth, ResNet-50 layout (161 tensors, 97.5 MiB)",
      pack_frac >= 0.9 && unpack_frac >= 0.9 ? "MET" : "not met",
      Fmt("pack %.0f GB/s (%.0f%% of copy)", gbs / pack_ms, 100 * pack_frac) +
          Fmt(", unpack %.0f GB/s (%.0f%%); cudaMemcpy %.0f GB/s", gbs / unpack_ms,
              100 * unpack_frac, gbs / memcpy_ms));
  cudaFree(grads);
  cudaFree(fused);
  cudaFree(copy);
}

#if KOLO_WITH_NCCL
void CheckNccl() {
  auto api = Nccl();
  if (!api.ok()) {
    Row("NCCL", "skipped", api.status().message());
    return;
  }
  SoloCommunicator solo;
  int cases = 0, bad = 0;
  for (DataType dtype : kDtypes) {
    ncclDataType_t t;
    if (!NcclDataType(dtype, &t)) continue;
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      const size_t count = 4097, bytes = count * DataTypeSize(dtype);
      std::vector<uint8_t> in = Pattern(dtype, count, 3), out(bytes);
      void* d = nullptr;
      cudaMalloc(&d, bytes);
      cudaMemcpy(d, in.data(), bytes, cudaMemcpyHostToDevice);
      Status s = RunNcclAllreduce(solo, AllreduceArgs{d, d, count, dtype, op});
      cudaMemcpy(out.data(), d, bytes, cudaMemcpyDeviceToHost);
      ++cases;
      if (!s.ok() || std::memcmp(in.data(), out.data(), bytes) != 0) {
        ++bad;
        std::fprintf(stderr, "nccl: %s op %d: %s\n", std::string(DataTypeName(dtype)).c_str(),
                     static_cast<int>(op), s.ToString().c_str());
      }
      cudaFree(d);
    }
  }
  g_failures += bad;
  Row("NCCL all-reduce through kolo, 1 rank (" + NcclVersionString() + ")",
      bad == 0 ? "PASS" : "FAIL", std::to_string(cases - bad) + "/" + std::to_string(cases) +
                                      " dtype x op cases");
  // kolo's path (pointer check, its stream, polled wait) against the raw call.
  auto nc = NcclCommFor(solo, 0);
  auto stream = KoloStream(solo, 0);
  if (!nc.ok() || !stream.ok()) return;
  for (size_t mib : {1, 16, 256, 1024}) {
    const size_t count = mib << 18;  // float32
    float* d = nullptr;
    if (cudaMalloc(&d, count * 4) != cudaSuccess) break;
    auto time_us = [&](auto&& f) {
      std::vector<double> us;
      for (int i = 0; i < 23; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        const auto t1 = std::chrono::steady_clock::now();
        if (i >= 3) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
      std::sort(us.begin(), us.end());
      return us[us.size() / 2];
    };
    const double raw = time_us([&] {
      ncclResult_t r = (*api)->AllReduce(d, d, count, ncclFloat32, ncclSum, *nc, *stream);
      // A non-blocking communicator (nccl_comm.h) may finish the call later.
      while (r == ncclInProgress) (*api)->CommGetAsyncError(*nc, &r);
      cudaStreamSynchronize(*stream);
    });
    const double kolo = time_us(
        [&] { RunNcclAllreduce(solo, AllreduceArgs{d, d, count, DataType::kFloat32}).ok(); });
    Row(Fmt("all-reduce %.0f MiB: kolo / raw ncclAllReduce", static_cast<double>(mib)),
        kolo <= 1.05 * raw ? "MET" : "not met",
        Fmt("kolo %.1f us, raw %.1f us, ratio %.3f", kolo, raw, kolo / raw));
    cudaFree(d);
  }
}
#endif

#if KOLO_WITH_NCCL
// The first element where `got` differs from `want`, as "[i] in x, got y, want z" (float32 or
// float64).
std::string FirstMismatch(DataType dtype, const std::vector<uint8_t>& in,
                          const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
  const size_t size = DataTypeSize(dtype), count = want.size() / size;
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(&got[i * size], &want[i * size], size) == 0) continue;
    auto value = [&](const std::vector<uint8_t>& v) {  // float32 or float64
      double d = 0;
      if (dtype == DataType::kFloat32) {
        float f;
        std::memcpy(&f, &v[i * size], 4);
        d = f;
      } else {
        std::memcpy(&d, &v[i * size], 8);
      }
      return d;
    };
    return Fmt("[%.0f] in %g, ", static_cast<double>(i), value(in)) +
           Fmt("got %g, want %g", value(got), value(want));
  }
  return "no difference";
}

// An all-reduce whose one-rank result differs from its input: out of place into a poisoned
// output, times a factor (NcclPostscaleFor: ncclRedOpCreatePreMulSum for float32 and float64),
// through kolo's call and, for comparison, through the raw NCCL calls. The first case runs on a
// communicator made for it, as the runtime's first all-reduce does.
void CheckScaledAllreduce() {
  auto api = Nccl();
  if (!api.ok()) return;  // CheckNccl said why
  int cases = 0, bad = 0, declined = 0, raw_cases = 0, raw_bad = 0;
  std::string first_bad, first_raw_bad;
  SoloCommunicator fresh, warm;
  for (int pass = 0; pass < 2; ++pass) {
    for (DataType dtype : {DataType::kFloat32, DataType::kFloat64}) {
      for (size_t count : {size_t{4097}, size_t{70001}}) {
        for (double factor : {0.5, 0.25}) {
          const size_t bytes = count * DataTypeSize(dtype);
          std::vector<uint8_t> in = Pattern(dtype, count, 11), want(bytes), got(bytes);
          ScaleCopy(want.data(), in.data(), count, dtype, factor).ok();
          void* d_in = nullptr;
          void* d_out = nullptr;
          cudaMalloc(&d_in, bytes);
          cudaMalloc(&d_out, bytes);
          cudaMemcpy(d_in, in.data(), bytes, cudaMemcpyHostToDevice);
          const std::string label = std::string(DataTypeName(dtype)) +
                                    Fmt(" x%.0f x%g: ", static_cast<double>(count), factor);
          // kolo's call: pass 0 on `fresh` (its first call makes its communicator). Where
          // NcclPostscaleFor does not fold the factor, kolo's call must refuse it (the runtime
          // then scales in its own pass: GpuRuntime.OneTensorOutOfPlaceWithAPostscale...).
          SoloCommunicator& solo = pass == 0 ? fresh : warm;
          const bool folds = NcclPostscaleFor(dtype, factor, 1) != NcclPostscale::kNone;
          cudaMemset(d_out, 0xA5, bytes);
          Status s = EnqueueNcclAllreduce(solo, AllreduceArgs{d_in, d_out, count, dtype}, factor);
          auto stream = KoloStream(solo, 0);
          if (s.ok())
            s = stream.ok() ? WaitForNccl(solo, 0, *stream, "gpu check") : stream.status();
          cudaMemcpy(got.data(), d_out, bytes, cudaMemcpyDeviceToHost);
          ++cases;
          std::string what;
          if (!folds && s.code() == StatusCode::kUnimplemented) {
            ++declined;
          } else if (!folds) {
            what = label + "not refused: " + s.ToString();
          } else if (!s.ok() || got != want) {
            what = label + (s.ok() ? FirstMismatch(dtype, in, got, want) : s.ToString());
          }
          if (!what.empty()) {
            ++bad;
            if (first_bad.empty()) first_bad = (pass == 0 ? "fresh " : "") + what;
            std::fprintf(stderr, "scaled all-reduce (kolo, pass %d): %s\n", pass, what.c_str());
          }
          // The raw calls on kolo's communicator and stream (pass 1: made by now).
          auto nc = NcclCommFor(solo, 0);
          ncclDataType_t t;
          if (pass == 1 && nc.ok() && stream.ok() && NcclDataType(dtype, &t)) {
            float f32 = static_cast<float>(factor);
            double f64 = factor;
            void* scalar = dtype == DataType::kFloat32 ? static_cast<void*>(&f32) : &f64;
            ncclRedOp_t op;
            cudaMemset(d_out, 0xA5, bytes);
            ncclResult_t r =
                (*api)->RedOpCreatePreMulSum(&op, scalar, t, ncclScalarHostImmediate, *nc);
            while (r == ncclInProgress) (*api)->CommGetAsyncError(*nc, &r);
            if (r == ncclSuccess) {
              r = (*api)->AllReduce(d_in, d_out, count, t, op, *nc, *stream);
              while (r == ncclInProgress) (*api)->CommGetAsyncError(*nc, &r);
              (*api)->RedOpDestroy(op, *nc);
            }
            cudaStreamSynchronize(*stream);
            cudaMemcpy(got.data(), d_out, bytes, cudaMemcpyDeviceToHost);
            ++raw_cases;
            if (r != ncclSuccess || got != want) {
              ++raw_bad;
              const std::string what =
                  label + (r == ncclSuccess ? FirstMismatch(dtype, in, got, want)
                                            : Fmt("NCCL error %.0f", static_cast<double>(r)));
              if (first_raw_bad.empty()) first_raw_bad = what;
              std::fprintf(stderr, "scaled all-reduce (raw NCCL): %s\n", what.c_str());
            }
          }
          cudaFree(d_in);
          cudaFree(d_out);
        }
      }
    }
  }
  g_failures += bad;
  Row("all-reduce out of place x factor through kolo's NCCL call, 1 rank (float32, float64)",
      bad == 0 ? "PASS" : "FAIL",
      std::to_string(cases - bad) + "/" + std::to_string(cases) + " cases right (" +
          std::to_string(declined) + " refused: kolo scales those itself)" +
          (first_bad.empty() ? "" : "; first wrong: " + first_bad));
  // NCCL's own result, the reason kolo refuses at one rank: not counted as kolo's failure.
  Row("the same through raw ncclRedOpCreatePreMulSum + ncclAllReduce (NCCL itself)",
      raw_bad == 0 ? "PASS" : "wrong (NCCL's)",
      std::to_string(raw_cases - raw_bad) + "/" + std::to_string(raw_cases) + " cases right" +
          (first_raw_bad.empty() ? "" : "; first wrong: " + first_raw_bad));
}

// One rank's all-gather, all-to-all and reduce-scatter return its input: each call must go
// through NCCL (communicator, kolo's stream, polled wait) and write every byte of the output.
void CheckNcclExchange() {
  if (!Nccl().ok()) return;  // CheckNccl said why
  SoloCommunicator solo;
  auto stream = KoloStream(solo, 0);
  if (!stream.ok()) {
    Row("NCCL all-gather / all-to-all / reduce-scatter", "FAIL", stream.status().message());
    ++g_failures;
    return;
  }
  int cases = 0, bad = 0;
  for (DataType dtype : kDtypes) {
    const size_t count = 4097, bytes = count * DataTypeSize(dtype);
    std::vector<uint8_t> in = Pattern(dtype, count, 8), out(bytes);
    void* d_in = nullptr;
    void* d_out = nullptr;
    cudaMalloc(&d_in, bytes);
    cudaMalloc(&d_out, bytes);
    cudaMemcpy(d_in, in.data(), bytes, cudaMemcpyHostToDevice);
    ncclDataType_t t;
    const bool reduces = NcclDataType(dtype, &t);
    for (int which = 0; which < (reduces ? 3 : 2); ++which) {
      cudaMemset(d_out, 0xA5, bytes);
      Status s = which == 0   ? EnqueueNcclAllgatherv(solo, 0, d_in, d_out, {bytes})
                 : which == 1 ? EnqueueNcclAlltoallv(solo, 0, d_in, {bytes}, d_out, {bytes})
                              : EnqueueNcclReduceScatter(solo, 0, d_in, d_out, count, dtype,
                                                         ReduceOp::kSum);
      if (s.ok()) s = WaitForNccl(solo, 0, *stream, "gpu check");
      cudaMemcpy(out.data(), d_out, bytes, cudaMemcpyDeviceToHost);
      ++cases;
      if (!s.ok() || out != in) {
        ++bad;
        std::fprintf(stderr, "nccl %s: %s: %s\n",
                     which == 0 ? "allgather" : which == 1 ? "alltoall" : "reduce-scatter",
                     std::string(DataTypeName(dtype)).c_str(), s.ToString().c_str());
      }
    }
    cudaFree(d_in);
    cudaFree(d_out);
  }
  g_failures += bad;
  Row("NCCL all-gather / all-to-all / reduce-scatter through kolo, 1 rank",
      bad == 0 ? "PASS" : "FAIL",
      std::to_string(cases - bad) + "/" + std::to_string(cases) + " op x dtype cases");
}
#endif

int Main() {
  std::printf("| check | result | detail |\n| --- | --- | --- |\n");
  std::string why;
  if (CudaDeviceCount(&why) == 0) {
    // An NVIDIA driver too old for kolo's runtime is a GPU machine checked for nothing: a
    // failure, not a skip.
    const bool old_driver = !CudaDriverTooOld().empty();
    Row("CUDA device", old_driver ? "FAIL" : "skipped", "no device: " + why);
    return old_driver ? 1 : 0;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  int driver = 0;
  cudaDriverGetVersion(&driver);
  Row("CUDA device", "found",
      std::string(prop.name) + Fmt(", sm_%.0f%.0f, %.0f GiB, driver API ", prop.major, prop.minor,
                                   prop.totalGlobalMem / 1073741824.0) +
          Fmt("%.0f.%.0f", driver / 1000, (driver % 1000) / 10));
  CheckPackCorrectness();
  CheckPackBandwidth();
#if KOLO_WITH_NCCL
  CheckNccl();
  CheckScaledAllreduce();
  CheckNcclExchange();
#else
  Row("NCCL", "skipped", "built without NCCL");
#endif
  return g_failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace kolo

int main() { return kolo::Main(); }
