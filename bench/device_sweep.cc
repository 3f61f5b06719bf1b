#include "bench/device_sweep.h"

#include <algorithm>
#include <cstdio>
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
#endif

namespace kolo::bench {

#if KOLO_WITH_CUDA && KOLO_WITH_NCCL

namespace {

void CheckCuda(const World& world, cudaError_t e, const char* call) {
  if (e != cudaSuccess) Fail(world, std::string(call) + ": " + cudaGetErrorString(e));
}

}  // namespace

void RunDeviceSweep(const World& world, const SweepOptions& options, Report* report) {
  std::string why;
  const int gpus = CudaDeviceCount(&why);
  if (gpus == 0) Fail(world, "--device cuda: no CUDA device here (" + why + ")");
  auto api = Nccl();
  if (!api.ok()) Fail(world, "--device cuda: " + api.status().message());
  int local_rank = world.rank;
  if (const char* lr = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) local_rank = std::atoi(lr);
  const int device = local_rank % gpus;
  CheckCuda(world, cudaSetDevice(device), "cudaSetDevice");

  MPI_Comm dup;
  CheckMpi(world, MPI_Comm_dup(world.comm, &dup), "MPI_Comm_dup");
  MpiCommunicator comm(dup, size_t{1} << 30);
  auto nccl_comm = NcclCommFor(comm, device);
  if (!nccl_comm.ok()) Fail(world, nccl_comm.status().ToString());
  auto stream = KoloStream(comm, device);
  if (!stream.ok()) Fail(world, stream.status().ToString());

  const std::vector<int64_t> sizes =
      SweepSizes(options.min_bytes, options.max_bytes, options.step_factor, options.step_bytes);
  if (sizes.empty()) {
    report->Note("no sizes between -b and -e");
    return;
  }
  const int64_t max_bytes = *std::max_element(sizes.begin(), sizes.end());
  void* input = nullptr;
  void* out_nccl = nullptr;
  void* out_kolo = nullptr;
  CheckCuda(world, cudaMalloc(&input, max_bytes), "cudaMalloc");
  CheckCuda(world, cudaMalloc(&out_nccl, max_bytes), "cudaMalloc");
  CheckCuda(world, cudaMalloc(&out_kolo, max_bytes), "cudaMalloc");
  std::vector<char> host(static_cast<size_t>(max_bytes));
  report->Note("device buffers on cuda:" + std::to_string(device) + " (" +
               NcclVersionString() + "); nccl = ncclAllReduce + cudaStreamSynchronize");
  const std::vector<std::string> paths = {"nccl", "kolo"};
  report->SweepColumns(paths);
  std::string ratios;  // kolo's time over NCCL's per row, for the line after the table

  for (const DtypeInfo* dtype : options.dtypes) {
    ncclDataType_t nt;
    if (!NcclDataType(static_cast<DataType>(dtype->kolo), &nt)) {
      report->Note(std::string(dtype->name) + ": NCCL has no such type; skipped");
      continue;
    }
    for (const OpInfo* op : options.ops) {
      ncclRedOp_t nop;
      if (!NcclRedOp(static_cast<ReduceOp>(op->kolo), &nop)) {
        report->Note(std::string(op->name) + ": NCCL has no such reduction; skipped");
        continue;
      }
      const CheckPattern pattern(*dtype, *op, world.size);
      pattern.Fill(host.data(), max_bytes / static_cast<int64_t>(dtype->size), world.rank, 0);
      CheckCuda(world, cudaMemcpy(input, host.data(), max_bytes, cudaMemcpyHostToDevice),
                "cudaMemcpy");
      for (const int64_t size : sizes) {
        const int64_t count = size / static_cast<int64_t>(dtype->size);
        if (count == 0) continue;
        const int64_t bytes = count * static_cast<int64_t>(dtype->size);
        const std::string name = "kolo-bench/cuda/" + std::string(dtype->name) + "/" +
                                 std::string(op->name) + "/" + std::to_string(bytes);
        auto call = [&](int path) {
          if (path == 0) {
            ncclResult_t r =
                (*api)->AllReduce(input, out_nccl, count, nt, nop, *nccl_comm, *stream);
            // A non-blocking communicator (nccl_comm.h) may finish the call later.
            while (r == ncclInProgress) (*api)->CommGetAsyncError(*nccl_comm, &r);
            if (r != ncclSuccess) Fail(world, NcclError(r, "ncclAllReduce").ToString());
            CheckCuda(world, cudaStreamSynchronize(*stream), "cudaStreamSynchronize");
          } else {
            const int64_t shape[1] = {count};
            kolo_handle_t h = nullptr;
            CheckKolo(world,
                      kolo_allreduce_async_on_stream(0, name.c_str(), input, out_kolo,
                                                     dtype->kolo, 1, shape, op->kolo, 1.0, 1.0,
                                                     nullptr, &h),
                      "kolo_allreduce_async_on_stream", name.c_str(), h);
            KoloFinish(world, h, name.c_str());
          }
        };
        std::vector<int64_t> wrong(2, 0);
        for (int p = 0; p < 2; ++p) {
          CheckCuda(world, cudaMemset(p == 0 ? out_nccl : out_kolo, 0xff, bytes), "cudaMemset");
          call(p);
          if (options.check) {
            CheckCuda(world, cudaMemcpy(host.data(), p == 0 ? out_nccl : out_kolo, bytes,
                                        cudaMemcpyDeviceToHost), "cudaMemcpy");
            wrong[p] = pattern.CountWrong(host.data(), count, 0, nullptr);
          }
        }
        for (int w = 1; w < options.warmup; ++w) {
          call(0);
          call(1);
        }
        std::vector<double> samples(2 * static_cast<size_t>(options.repeats));
        for (int r = 0; r < options.repeats; ++r) {
          for (int k = 0; k < 2; ++k) {
            const int p = (r + k) % 2;
            Barrier(world);
            const double start = NowSeconds();
            for (int i = 0; i < options.iters; ++i) call(p);
            samples[p * options.repeats + r] = (NowSeconds() - start) * 1e6 / options.iters;
          }
        }
        samples = CombineOverRanks(world, samples, options.average);
        std::vector<PathResult> results;
        for (int p = 0; p < 2; ++p) {
          const std::vector<double> mine(samples.begin() + p * options.repeats,
                                         samples.begin() + (p + 1) * options.repeats);
          PathResult res;
          res.path = paths[p];
          res.time_us = Median(mine);
          res.min_us = *std::min_element(mine.begin(), mine.end());
          res.max_us = *std::max_element(mine.begin(), mine.end());
          res.wrong = options.check ? SumOverRanks(world, wrong[p]) : -1;
          results.push_back(res);
        }
        if (results[0].time_us > 0) {
          char text[64];
          std::snprintf(text, sizeof text, " %lld:%.2f", static_cast<long long>(bytes),
                        results[1].time_us / results[0].time_us);
          ratios += text;
        }
        report->SweepRow(bytes, count, std::string(dtype->name), std::string(op->name), results);
      }
    }
  }
  if (!ratios.empty()) report->Note("kolo/nccl time ratio per size (B:ratio):" + ratios);
  cudaFree(input);
  cudaFree(out_nccl);
  cudaFree(out_kolo);
}

#else

void RunDeviceSweep(const World& world, const SweepOptions&, Report*) {
  Fail(world, "--device cuda: kolo-bench was built without CUDA and NCCL");
}

#endif

}  // namespace kolo::bench
