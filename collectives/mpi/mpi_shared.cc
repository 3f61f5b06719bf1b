// Shared memory among the ranks of one host (Communicator::AllocateShared), through POSIX
// shm_open rather than MPI_Win_allocate_shared: freeing an MPI window is collective, and a
// segment must be releasable by one rank alone when the others are gone or failing.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "collectives/mpi/mpi_call.h"
#include "collectives/mpi/mpi_communicator.h"

namespace kolo {
namespace {

class PosixSegment : public SharedSegment {
 public:
  PosixSegment(void* base, size_t total, size_t stride, size_t bytes)
      : base_(static_cast<char*>(base)), total_(total), stride_(stride), bytes_(bytes) {}
  ~PosixSegment() override { munmap(base_, total_); }
  void* Region(int rank) override { return base_ + static_cast<size_t>(rank) * stride_; }
  size_t RegionBytes() const override { return bytes_; }

 private:
  char* base_;
  size_t total_, stride_, bytes_;
};

std::string Errno(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

}  // namespace

StatusOr<std::unique_ptr<SharedSegment>> MpiCommunicator::AllocateShared(size_t bytes_per_rank) {
  static std::atomic<int> counter{0};
  const size_t stride = (std::max<size_t>(bytes_per_rank, 1) + 4095) / 4096 * 4096;
  const size_t total = stride * static_cast<size_t>(size_);
  // Rank 0 names and sizes the segment; the name travels with its outcome.
  char name[64] = {};
  std::string error;
  if (rank_ == 0) {
    std::snprintf(name, sizeof(name), "/kolo-%d-%d", static_cast<int>(getpid()), counter++);
    const int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
      error = Errno("shm_open");
    } else {
      if (ftruncate(fd, static_cast<off_t>(total)) != 0) error = Errno("ftruncate");
      close(fd);
    }
    if (!error.empty()) name[0] = '\0';
  }
  KOLO_MPI_CALL(MPI_Bcast(name, sizeof(name), MPI_CHAR, 0, comm_));
  void* base = MAP_FAILED;
  if (name[0] != '\0') {
    const int fd = shm_open(name, O_RDWR, 0600);
    if (fd < 0) {
      error = Errno("shm_open");
    } else {
      base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (base == MAP_FAILED) error = Errno("mmap");
      close(fd);
    }
  } else if (error.empty()) {
    error = "rank 0 could not create the segment";
  }
  // Every rank learns whether every rank mapped it, so all succeed or fail together.
  int ok = error.empty() ? 1 : 0, all_ok = 0;
  const int rc = MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm_);
  if (rank_ == 0 && name[0] != '\0') shm_unlink(name);
  if (rc != MPI_SUCCESS || !all_ok) {
    if (base != MAP_FAILED) munmap(base, total);
    if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Allreduce");
    return UnimplementedError("shared memory of " + std::to_string(total) + " bytes over " +
                              std::to_string(size_) + " ranks: " +
                              (error.empty() ? "another rank could not map it" : error));
  }
  return std::unique_ptr<SharedSegment>(new PosixSegment(base, total, stride, bytes_per_rank));
}

}  // namespace kolo
