#include "bench/device_replay.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench/check.h"
#include "collectives/cuda/device.h"
#include "kolo/config.h"

#if KOLO_WITH_CUDA && KOLO_WITH_NCCL
#include <cuda_runtime.h>

#include "collectives/mpi/mpi_communicator.h"
#include "collectives/nccl/nccl_comm.h"
#include "collectives/nccl/nccl_lib.h"
#include "fusion/cuda/device_pack.h"
#endif

namespace kolo::bench {

#if KOLO_WITH_CUDA && KOLO_WITH_NCCL

namespace {

constexpr int64_t kAlignBytes = 256;
constexpr int kMaxWrongReports = 8;

void CheckCuda(const World& world, cudaError_t e, const char* call) {
  if (e != cudaSuccess) Fail(world, std::string(call) + ": " + cudaGetErrorString(e));
}

std::string Fmt(const char* format, double a, double b) {
  char buf[128];
  std::snprintf(buf, sizeof buf, format, a, b);
  return buf;
}

// Device memory for the replay's life.
class DeviceBuffer {
 public:
  DeviceBuffer(const World& world, size_t bytes) {
    CheckCuda(world, cudaMalloc(&data_, bytes > 0 ? bytes : 1), "cudaMalloc");
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  char* get() const { return static_cast<char*>(data_); }

 private:
  void* data_ = nullptr;
};

struct Slot {
  const TensorSpec* spec;
  int64_t count;         // elements
  int64_t offset;        // bytes, in the input and output arenas
  int64_t packed_index;  // elements before it in registration order: its check-pattern index
};

class DeviceReplayer {
 public:
  DeviceReplayer(const World& world, const ModelLayout& model, const ReplayOptions& options,
                 const NcclApi& api, ncclComm_t nccl, cudaStream_t stream)
      : world_(world),
        dtype_(*options.dtype),
        op_(*options.op),
        pattern_(dtype_, op_, world.size),
        api_(api),
        nccl_(nccl),
        stream_(stream) {
    const auto elem = static_cast<int64_t>(dtype_.size);
    for (const TensorSpec& t : model.tensors) {
      slots_.push_back(Slot{&t, t.NumElements(), arena_bytes_, total_count_});
      arena_bytes_ += (t.NumElements() * elem + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
      total_count_ += t.NumElements();
    }
    order_ = BackwardOrder(model);
    const auto reduce_op = static_cast<ReduceOp>(op_.kolo);
    average_ = reduce_op == ReduceOp::kAverage;
    if (!NcclDataType(static_cast<DataType>(dtype_.kolo), &nccl_dtype_)) {
      Fail(world, "--device cuda: NCCL has no " + std::string(dtype_.name));
    }
    if (!NcclRedOp(average_ ? ReduceOp::kSum : reduce_op, &nccl_op_)) {
      Fail(world, "--device cuda: NCCL has no " + std::string(op_.name));
    }
    if (average_ && !dtype_.floating) {
      Fail(world, "--device cuda: kolo's device path has no Average of integers (use -o sum)");
    }
    const size_t total_bytes = static_cast<size_t>(total_count_) * dtype_.size;
    input_ = std::make_unique<DeviceBuffer>(world, arena_bytes_);
    kolo_out_ = std::make_unique<DeviceBuffer>(world, arena_bytes_);
    nccl_out_ = std::make_unique<DeviceBuffer>(world, arena_bytes_);
    fused_in_ = std::make_unique<DeviceBuffer>(world, total_bytes);
    fused_out_ = std::make_unique<DeviceBuffer>(world, total_bytes);
    host_.resize(std::max<size_t>(arena_bytes_, total_bytes));
    for (const Slot& s : slots_) {
      pattern_.Fill(host_.data() + s.offset, s.count, world.rank, s.packed_index);
    }
    CheckCuda(world, cudaMemcpy(input_->get(), host_.data(), arena_bytes_, cudaMemcpyHostToDevice),
              "cudaMemcpy");
    pattern_.Fill(host_.data(), total_count_, world.rank, 0);
    CheckCuda(world, cudaMemcpy(fused_in_->get(), host_.data(), total_bytes,
                                cudaMemcpyHostToDevice),
              "cudaMemcpy");
    handles_.resize(slots_.size());
  }

  int64_t total_count() const { return total_count_; }
  bool exact() const { return pattern_.exact(); }

  void Poison(const std::string& path) {
    const bool fused = path == "nccl-fused";
    CheckCuda(world_, cudaMemset(Output(path), 0xff, fused ? FusedBytes() : arena_bytes_),
              "cudaMemset");
  }

  void Step(const std::string& path) {
    if (path == "kolo") {
      for (int t : order_) {
        const Slot& s = slots_[t];
        const char* name = s.spec->name.c_str();
        CheckKolo(world_,
                  kolo_allreduce_async_on_stream(
                      0, name, input_->get() + s.offset, kolo_out_->get() + s.offset, dtype_.kolo,
                      static_cast<int>(s.spec->shape.size()), s.spec->shape.data(), op_.kolo, 1.0,
                      1.0, stream_, &handles_[t]),
                  "kolo_allreduce_async_on_stream", name, handles_[t]);
      }
      for (int t : order_) KoloFinish(world_, handles_[t], slots_[t].spec->name.c_str());
      return;
    }
    std::vector<DeviceSegment> scale;
    if (path == "nccl-per-tensor") {
      for (int t : order_) {
        const Slot& s = slots_[t];
        Nccl(input_->get() + s.offset, nccl_out_->get() + s.offset, s.count);
        char* out = nccl_out_->get() + s.offset;
        scale.push_back({out, out, static_cast<size_t>(s.count)});
      }
    } else {  // nccl-fused
      Nccl(fused_in_->get(), fused_out_->get(), total_count_);
      scale.push_back({fused_out_->get(), fused_out_->get(), static_cast<size_t>(total_count_)});
    }
    if (average_) {
      // One batched pass over every tensor, in place, as kolo's own direct path does.
      const Status st = BatchedScaleCopy(scale, static_cast<DataType>(dtype_.kolo),
                                         1.0 / world_.size, stream_);
      if (!st.ok()) Fail(world_, "avg's scaling pass: " + st.ToString());
    }
    CheckCuda(world_, cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  // Wrong elements of `path`'s outputs on this rank; describes the first in *first_bad.
  int64_t CountWrong(const std::string& path, std::string* first_bad) {
    if (path == "nccl-fused") {
      CheckCuda(world_, cudaMemcpy(host_.data(), fused_out_->get(), FusedBytes(),
                                   cudaMemcpyDeviceToHost),
                "cudaMemcpy");
      return pattern_.CountWrong(host_.data(), total_count_, 0, first_bad);
    }
    CheckCuda(world_, cudaMemcpy(host_.data(), Output(path), arena_bytes_, cudaMemcpyDeviceToHost),
              "cudaMemcpy");
    int64_t wrong = 0;
    for (const Slot& s : slots_) {
      std::string bad;
      const int64_t w = pattern_.CountWrong(host_.data() + s.offset, s.count, s.packed_index, &bad);
      if (w > 0 && wrong == 0) *first_bad = "tensor '" + s.spec->name + "' " + bad;
      wrong += w;
    }
    return wrong;
  }

  // The batched pack and unpack kernels on this layout against a device-to-device copy of the
  // same bytes: milliseconds of {copy, pack, unpack}, medians of 20 after 3 warmup.
  std::vector<double> MeasurePack() {
    std::vector<const void*> tensors;
    std::vector<void*> outputs;
    std::vector<size_t> counts, offsets;
    size_t at = 0;
    for (const Slot& s : slots_) {
      tensors.push_back(input_->get() + s.offset);
      outputs.push_back(kolo_out_->get() + s.offset);
      counts.push_back(static_cast<size_t>(s.count));
      offsets.push_back(at);
      at += static_cast<size_t>(s.count) * dtype_.size;
    }
    const auto dtype = static_cast<DataType>(dtype_.kolo);
    // The factors kolo's fused path uses for this op: no prescale; Average's 1/size on unpack.
    const double postscale = average_ ? 1.0 / world_.size : 1.0;
    auto check = [&](const Status& st) {
      if (!st.ok()) Fail(world_, "pack/unpack kernels: " + st.ToString());
    };
    const double copy = MedianMs([&] {
      CheckCuda(world_, cudaMemcpyAsync(fused_out_->get(), fused_in_->get(), FusedBytes(),
                                        cudaMemcpyDeviceToDevice, stream_),
                "cudaMemcpyAsync");
    });
    const double pack = MedianMs([&] {
      check(PackToFusion(tensors, counts, offsets, fused_out_->get(), dtype, 1.0, stream_));
    });
    const double unpack = MedianMs([&] {
      check(UnpackFromFusion(fused_in_->get(), offsets, outputs, counts, dtype, postscale,
                             stream_));
    });
    return {copy, pack, unpack};
  }

  size_t FusedBytes() const { return static_cast<size_t>(total_count_) * dtype_.size; }

 private:
  char* Output(const std::string& path) const {
    if (path == "kolo") return kolo_out_->get();
    if (path == "nccl-per-tensor") return nccl_out_->get();
    return fused_out_->get();
  }

  void Nccl(const void* send, void* recv, int64_t count) {
    const ncclResult_t r = api_.AllReduce(send, recv, static_cast<size_t>(count), nccl_dtype_,
                                          nccl_op_, nccl_, stream_);
    if (r != ncclSuccess) Fail(world_, NcclError(r, "ncclAllReduce").ToString());
  }

  template <typename F>
  double MedianMs(F&& enqueue) {
    cudaEvent_t a = nullptr, b = nullptr;
    CheckCuda(world_, cudaEventCreate(&a), "cudaEventCreate");
    CheckCuda(world_, cudaEventCreate(&b), "cudaEventCreate");
    std::vector<double> ms;
    for (int i = 0; i < 23; ++i) {
      CheckCuda(world_, cudaEventRecord(a, stream_), "cudaEventRecord");
      enqueue();
      CheckCuda(world_, cudaEventRecord(b, stream_), "cudaEventRecord");
      CheckCuda(world_, cudaEventSynchronize(b), "cudaEventSynchronize");
      float t = 0;
      CheckCuda(world_, cudaEventElapsedTime(&t, a, b), "cudaEventElapsedTime");
      if (i >= 3) ms.push_back(t);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return Median(ms);
  }

  const World& world_;
  const DtypeInfo& dtype_;
  const OpInfo& op_;
  const CheckPattern pattern_;
  const NcclApi& api_;
  ncclComm_t nccl_;
  cudaStream_t stream_;
  ncclDataType_t nccl_dtype_ = ncclFloat32;
  ncclRedOp_t nccl_op_ = ncclSum;
  bool average_ = false;
  std::vector<Slot> slots_;
  std::vector<int> order_;
  std::vector<kolo_handle_t> handles_;
  int64_t arena_bytes_ = 0;
  int64_t total_count_ = 0;
  std::unique_ptr<DeviceBuffer> input_, kolo_out_, nccl_out_, fused_in_, fused_out_;
  std::vector<char> host_;
};

}  // namespace

void RunDeviceReplay(const World& world, const ModelLayout& model, const ReplayOptions& options,
                     Report* report) {
  std::string why;
  const int gpus = CudaDeviceCount(&why);
  if (gpus == 0) Fail(world, "--device cuda --model: no CUDA device here (" + why + ")");
  auto api = Nccl();
  if (!api.ok()) Fail(world, "--device cuda --model: " + api.status().message());
  int local_rank = world.rank;
  if (const char* lr = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) local_rank = std::atoi(lr);
  const int device = local_rank % gpus;
  CheckCuda(world, cudaSetDevice(device), "cudaSetDevice");
  cudaStream_t stream = nullptr;
  CheckCuda(world, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
            "cudaStreamCreateWithFlags");

  MPI_Comm dup;
  CheckMpi(world, MPI_Comm_dup(world.comm, &dup), "MPI_Comm_dup");
  {
    MpiCommunicator comm(dup, size_t{1} << 30);
    auto nccl = NcclCommFor(comm, device);
    if (!nccl.ok()) Fail(world, nccl.status().ToString());
    DeviceReplayer replayer(world, model, options, **api, *nccl, stream);
    report->Note("device buffers on cuda:" + std::to_string(device) + " (" +
                 NcclVersionString() + "); raw paths on the bench's own stream and NCCL " +
                 "communicator, each step ending in cudaStreamSynchronize");
    if (options.check && !replayer.exact()) {
      report->Note(
          "no input pattern reduces exactly for this dtype/op/ranks; #wrong may count "
          "rounding");
    }

    const int npaths = static_cast<int>(options.paths.size());
    const int total = options.warmup + options.steps;
    std::vector<std::vector<double>> samples(npaths);
    std::vector<int64_t> wrong(npaths, 0);
    int wrong_reports = 0;
    for (int s = 0; s < total; ++s) {
      const bool check_step = options.check && (s == 0 || s == total - 1);
      for (int k = 0; k < npaths; ++k) {
        const int p = (s + k) % npaths;
        const std::string& path = options.paths[p];
        if (check_step) replayer.Poison(path);
        CheckCuda(world, cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        Barrier(world);
        const double start = NowSeconds();
        replayer.Step(path);
        const double elapsed_us = (NowSeconds() - start) * 1e6;
        if (s >= options.warmup) samples[p].push_back(elapsed_us);
        if (!check_step) continue;
        std::string first_bad;
        const int64_t w = replayer.CountWrong(path, &first_bad);
        wrong[p] += w;
        if (w > 0 && wrong_reports++ < kMaxWrongReports) {
          std::fprintf(stderr,
                       "kolo-bench: rank %d: model %s on cuda:%d, path %s, step %d: %lld wrong, "
                       "first: %s\n",
                       world.rank, model.name.c_str(), device, path.c_str(), s,
                       static_cast<long long>(w), first_bad.c_str());
        }
      }
    }

    const ModelResult result =
        SummarizeReplay(world, model, options, model.description + " (on the GPU)",
                        replayer.total_count(), samples, wrong);
    report->Model(result);

    // Read + write per byte moved, for the copy as for the kernels.
    const std::vector<double> ms = MaxOverRanks(world, replayer.MeasurePack());
    const double gb = 2.0 * static_cast<double>(replayer.FusedBytes()) / 1e9;
    const double copy_gbs = gb / (ms[0] / 1e3);
    const double pack_frac = ms[0] / ms[1], unpack_frac = ms[0] / ms[2];
    report->Note("pack/unpack kernels on the " + model.name + " layout (" +
                 std::to_string(model.tensors.size()) + " tensors, " +
                 Fmt("%.1f MiB): cudaMemcpy device-to-device %.0f GB/s", result.bytes / 1048576.0,
                     copy_gbs));
    report->Note(Fmt("  pack   %.0f GB/s = %.0f%% of the device copy", gb / (ms[1] / 1e3),
                     100 * pack_frac) +
                 Fmt("; unpack %.0f GB/s = %.0f%%", gb / (ms[2] / 1e3), 100 * unpack_frac) +
                 (pack_frac >= 0.9 && unpack_frac >= 0.9 ? "; target >= 90%: met"
                                                         : "; target >= 90%: NOT met"));
    // The bench's NCCL communicator goes with `comm`.
    ForgetNcclComms(comm);
  }
  CheckCuda(world, cudaStreamDestroy(stream), "cudaStreamDestroy");
}

#else

void RunDeviceReplay(const World& world, const ModelLayout&, const ReplayOptions&, Report*) {
  Fail(world, "--device cuda: kolo-bench was built without CUDA and NCCL");
}

#endif

}  // namespace kolo::bench
