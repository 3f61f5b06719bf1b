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
  // Outputs by slot: 0 nccl, 1 kolo out of place; 2 nccl, 3 kolo in place (input == output,
  // refilled from `input` before each checked call and each timed block, not timed).
  void* out[4] = {};
  CheckCuda(world, cudaMalloc(&input, max_bytes), "cudaMalloc");
  for (void*& o : out) CheckCuda(world, cudaMalloc(&o, max_bytes), "cudaMalloc");
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
        const std::string name_in_place = name + "/in-place";
        // slot % 2: 0 nccl, 1 kolo; slot >= 2: in place.
        auto call = [&](int slot) {
          const bool in_place = slot >= 2;
          const void* send = in_place ? out[slot] : input;
          if (slot % 2 == 0) {
            ncclResult_t r =
                (*api)->AllReduce(send, out[slot], count, nt, nop, *nccl_comm, *stream);
            // A non-blocking communicator (nccl_comm.h) may finish the call later.
            while (r == ncclInProgress) (*api)->CommGetAsyncError(*nccl_comm, &r);
            if (r != ncclSuccess) Fail(world, NcclError(r, "ncclAllReduce").ToString());
            CheckCuda(world, cudaStreamSynchronize(*stream), "cudaStreamSynchronize");
          } else {
            const std::string& id = in_place ? name_in_place : name;
            const int64_t shape[1] = {count};
            kolo_handle_t h = nullptr;
            CheckKolo(world,
                      kolo_allreduce_async_on_stream(0, id.c_str(), send, out[slot], dtype->kolo, 1,
                                                     shape, op->kolo, 1.0, 1.0, nullptr, &h),
                      "kolo_allreduce_async_on_stream", id.c_str(), h);
            KoloFinish(world, h, id.c_str());
          }
        };
        auto refill = [&](int slot) {
          if (slot < 2) return;
          CheckCuda(world, cudaMemcpy(out[slot], input, bytes, cudaMemcpyDeviceToDevice),
                    "cudaMemcpy");
        };
        std::vector<int64_t> wrong(4, 0);
        for (int slot = 0; slot < 4; ++slot) {
          if (slot < 2) {
            CheckCuda(world, cudaMemset(out[slot], 0xff, bytes), "cudaMemset");
          } else {
            refill(slot);
          }
          call(slot);
          if (options.check) {
            CheckCuda(world, cudaMemcpy(host.data(), out[slot], bytes, cudaMemcpyDeviceToHost),
                      "cudaMemcpy");
            wrong[slot] = pattern.CountWrong(host.data(), count, 0, nullptr);
          }
        }
        for (int w = 1; w < options.warmup; ++w) {
          for (int slot = 0; slot < 4; ++slot) call(slot);
        }
        std::vector<double> samples(4 * static_cast<size_t>(options.repeats));
        for (int r = 0; r < options.repeats; ++r) {
          for (int k = 0; k < 4; ++k) {
            const int slot = (r + k) % 4;
            refill(slot);
            Barrier(world);
            const double start = NowSeconds();
            for (int i = 0; i < options.iters; ++i) call(slot);
            samples[slot * options.repeats + r] = (NowSeconds() - start) * 1e6 / options.iters;
          }
        }
        samples = CombineOverRanks(world, samples, options.average);
        std::vector<PathResult> results(2);
        for (int slot = 0; slot < 4; ++slot) {
          const std::vector<double> mine(samples.begin() + slot * options.repeats,
                                         samples.begin() + (slot + 1) * options.repeats);
          const double median = Median(mine);
          const double lo = *std::min_element(mine.begin(), mine.end());
          const double hi = *std::max_element(mine.begin(), mine.end());
          const int64_t w = options.check ? SumOverRanks(world, wrong[slot]) : -1;
          const int64_t failed = options.check ? SumOverRanks(world, wrong[slot] > 0 ? 1 : 0) : 0;
          PathResult& res = results[slot % 2];
          if (slot < 2) {
            res.path = paths[slot];
            res.time_us = median;
            res.min_us = lo;
            res.max_us = hi;
            res.wrong = w;
            res.failed = failed;
          } else {
            res.in_place.measured = true;
            res.in_place.time_us = median;
            res.in_place.min_us = lo;
            res.in_place.max_us = hi;
            res.in_place.wrong = w;
            res.in_place.failed = failed;
          }
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
  for (void* o : out) cudaFree(o);
}

#else

void RunDeviceSweep(const World& world, const SweepOptions&, Report*) {
  Fail(world, "--device cuda: kolo-bench was built without CUDA and NCCL");
}

#endif

}  // namespace kolo::bench
