// What every part of kolo-bench shares: the bench's own MPI communicator, fatal errors that name
// the rank, kolo status checks, timing helpers, and buffers that are allocated and first-touched
// once (docs/machine-notes.md: the first touch of fresh memory costs ~4 ms per MiB here, so a buffer
// touched inside a timed region would measure the kernel's page faults, not the collective).
#ifndef KOLO_BENCH_HARNESS_H_
#define KOLO_BENCH_HARNESS_H_

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/stats.h"
#include "kolo/kolo.h"

namespace kolo::bench {

// The bench's view of the job. `comm` is a dup of MPI_COMM_WORLD with MPI_ERRORS_RETURN, used by
// the `mpi` paths and for the bench's own barriers and reductions, never shared with kolo.
struct World {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  std::string host;
  // Whether MPI_Init ran with kolo's OMPI_MCA_btl_tcp_flags (collectives/mpi/tcp_defaults.h):
  // the variable is gone from the environment by the time the run's settings are listed.
  bool tcp_flags_by_kolo = false;
};

// Prints "kolo-bench: rank R/N (host): message" to stderr and aborts the whole job (exit 1):
// a failure on one rank would otherwise leave the others blocked in a collective.
[[noreturn]] void Fail(const World& world, const std::string& message);

// Fails when `status` is not KOLO_SUCCESS: "<call> '<name>': <STATUS>: <message>", the message
// taken from the handle when there is one, else from kolo_last_error().
void CheckKolo(const World& world, kolo_status_t status, const char* call, const char* name,
               kolo_handle_t handle);

// Fails when an MPI call returned an error: "<call>: <MPI error string>".
void CheckMpi(const World& world, int mpi_error, const char* call);

double NowSeconds();  // monotonic
double Median(std::vector<double> values);

// kolo_allreduce_async on a contiguous tensor, failing the job on error; the handle to finish.
kolo_handle_t KoloSubmit(const World& world, const char* name, const void* input, void* output,
                         kolo_dtype_t dtype, int ndim, const int64_t* shape, kolo_reduce_op_t op);
// kolo_wait, then kolo_handle_free; fails the job with the handle's message on error.
void KoloFinish(const World& world, kolo_handle_t handle, const char* name);

void Barrier(const World& world);

// Element-wise max over ranks (one MPI_Allreduce): a collective is done when its slowest rank is.
std::vector<double> MaxOverRanks(const World& world, const std::vector<double>& values);
int64_t SumOverRanks(const World& world, int64_t value);
// Element-wise rank 0's value, mean, min or max over ranks (nccl-tests' -a modes).
std::vector<double> CombineOverRanks(const World& world, const std::vector<double>& values,
                                     RankCombine mode);

// "kolo-bench: 12/22 sizes, 4.1 s" on rank 0's stderr once a sweep has run for 2 s, only when
// stderr is a terminal (never under mpirun, which pipes it; never with --no-progress): one line
// rewritten in place (\r) while a size is measured and cleared (\r\033[K) before the sweep
// prints anything, so it never lands inside a row or among the rows of a file.
class Progress {
 public:
  Progress(bool enabled, int total);
  ~Progress();  // clears the line
  void Done(int done);
  void Clear();  // before anything else is printed

 private:
  bool enabled_;
  int total_;
  double start_;
  double last_ = 0;
  bool shown_ = false;
};

// Page-aligned memory, written once at construction so its pages exist before any timing.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const World& world, size_t bytes, const char* what);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// 0xFF bytes: NaN for every floating dtype and a value the check patterns never produce for the
// integer dtypes (see check.h), so an element the collective did not write is counted wrong.
void Poison(void* data, size_t bytes);

}  // namespace kolo::bench

#endif  // KOLO_BENCH_HARNESS_H_
