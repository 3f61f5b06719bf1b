#include "bench/harness.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <unistd.h>

namespace kolo::bench {

void Fail(const World& world, const std::string& message) {
  std::fprintf(stderr, "kolo-bench: rank %d/%d (%s): %s\n", world.rank, world.size,
               world.host.c_str(), message.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

void CheckKolo(const World& world, kolo_status_t status, const char* call, const char* name,
               kolo_handle_t handle) {
  if (status == KOLO_SUCCESS) return;
  const char* message = handle != nullptr ? kolo_handle_message(handle) : kolo_last_error();
  std::string text = std::string(call) +
                     (name != nullptr && name[0] != '\0' ? " '" + std::string(name) + "'" : "") +
                     ": " + kolo_status_string(status) + ": " +
                     (message != nullptr && message[0] != '\0' ? message : "(no message)");
  Fail(world, text);
}

void CheckMpi(const World& world, int mpi_error, const char* call) {
  if (mpi_error == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(mpi_error, text, &length);
  Fail(world, std::string(call) + ": " + std::string(text, length));
}

kolo_handle_t KoloSubmit(const World& world, const char* name, const void* input, void* output,
                         kolo_dtype_t dtype, int ndim, const int64_t* shape, kolo_reduce_op_t op) {
  kolo_handle_t handle = nullptr;
  CheckKolo(world,
            kolo_allreduce_async(name, input, output, dtype, ndim, shape, op, 1.0, 1.0, &handle),
            "kolo_allreduce_async", name, nullptr);
  return handle;
}

void KoloFinish(const World& world, kolo_handle_t handle, const char* name) {
  const kolo_status_t status = kolo_wait(handle);
  CheckKolo(world, status, "kolo_wait", name, handle);
  kolo_handle_free(handle);
}

void Barrier(const World& world) { CheckMpi(world, MPI_Barrier(world.comm), "MPI_Barrier"); }

double NowSeconds() {
  using Clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

std::vector<double> MaxOverRanks(const World& world, const std::vector<double>& values) {
  std::vector<double> out(values.size());
  if (values.empty()) return out;
  CheckMpi(world,
           MPI_Allreduce(values.data(), out.data(), static_cast<int>(values.size()), MPI_DOUBLE,
                         MPI_MAX, world.comm),
           "MPI_Allreduce(max of timings)");
  return out;
}

int64_t SumOverRanks(const World& world, int64_t value) {
  int64_t sum = 0;
  CheckMpi(world, MPI_Allreduce(&value, &sum, 1, MPI_INT64_T, MPI_SUM, world.comm),
           "MPI_Allreduce(sum of #wrong)");
  return sum;
}

std::vector<double> CombineOverRanks(const World& world, const std::vector<double>& values,
                                     RankCombine mode) {
  std::vector<double> out(values);
  if (values.empty()) return out;
  const int count = static_cast<int>(values.size());
  switch (mode) {
    case RankCombine::kRank0:
      CheckMpi(world, MPI_Bcast(out.data(), count, MPI_DOUBLE, 0, world.comm),
               "MPI_Bcast(rank 0's timings)");
      return out;
    case RankCombine::kAverage:
    case RankCombine::kMin:
    case RankCombine::kMax: {
      const MPI_Op op = mode == RankCombine::kMin   ? MPI_MIN
                        : mode == RankCombine::kMax ? MPI_MAX
                                                    : MPI_SUM;
      CheckMpi(world, MPI_Allreduce(values.data(), out.data(), count, MPI_DOUBLE, op, world.comm),
               "MPI_Allreduce(timings over ranks)");
      if (mode == RankCombine::kAverage) {
        for (double& v : out) v /= world.size;
      }
      return out;
    }
  }
  return out;
}

Progress::Progress(bool enabled, int total)
    : enabled_(enabled && isatty(STDERR_FILENO) == 1), total_(total), start_(NowSeconds()) {}

Progress::~Progress() { Clear(); }

void Progress::Clear() {
  if (!shown_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  shown_ = false;
}

void Progress::Done(int done) {
  if (!enabled_) return;
  const double now = NowSeconds();
  const double elapsed = now - start_;
  if (elapsed < 2.0 || now - last_ < 0.2) return;
  last_ = now;
  shown_ = true;
  std::fprintf(stderr, "\rkolo-bench: %d/%d sizes, %.1f s\033[K", done, total_, elapsed);
  std::fflush(stderr);
}

Buffer::Buffer(const World& world, size_t bytes, const char* what) : bytes_(bytes) {
  constexpr size_t kPage = 4096;
  const size_t rounded = std::max<size_t>(kPage, (bytes + kPage - 1) / kPage * kPage);
  data_ = std::aligned_alloc(kPage, rounded);
  if (data_ == nullptr) {
    Fail(world, std::string("cannot allocate ") + std::to_string(bytes) + " bytes for " + what);
  }
  std::memset(data_, 0, rounded);  // the first touch, paid here once
}

Buffer::~Buffer() { std::free(data_); }

Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void Poison(void* data, size_t bytes) { std::memset(data, 0xFF, bytes); }

}  // namespace kolo::bench
