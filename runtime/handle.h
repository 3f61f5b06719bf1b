// The completion state of one submitted operation, shared between the submitting thread
// (poll/wait) and the background thread (complete). Completed exactly once.
#ifndef KOLO_RUNTIME_HANDLE_H_
#define KOLO_RUNTIME_HANDLE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

#include "base/status.h"
#include "runtime/wait_watch.h"

namespace kolo {

// Memory kolo allocates for an output whose size is known only after negotiation (allgather,
// reducescatter, alltoall): host memory (malloc) for host tensors, memory on the tensor's CUDA
// device for CUDA tensors (stream-ordered where the device allows, else cudaMalloc:
// runtime/device/device_ops.h), so a binding hands the output to its framework as a tensor on that
// device. The deleter knows which, so whoever drops the buffer frees it right.
struct BufferFree {
  int device = -1;  // -1: host memory (std::free); >= 0: that CUDA device's
  // Device memory from CUDA's stream-ordered allocator (AllocateOnStream), which cudaFree would
  // not wait for: freed in `stream`'s order (cudaFreeAsync), or, with no stream, after waiting
  // for the device (FreeStreamOrderedMemory).
  bool stream_ordered = false;
  // The stream whose work is the memory's last use: for an output handed to the caller, the
  // stream it submitted on (CUDA's legacy stream when none), as a framework's allocator frees a
  // tensor in the order of the stream it was made on; work on other streams must be ordered
  // before that stream's next work before the tensor is dropped (torch's wait_stream).
  void* stream = nullptr;
  void operator()(void* p) const;
};

struct OutputBuffer {
  using Free = BufferFree;
  std::unique_ptr<void, Free> data;
  std::vector<int64_t> shape;
  std::vector<int64_t> splits;  // alltoall: rows received from each rank
  // Where `data` lives: -1 host memory, >= 0 the CUDA device.
  int device() const { return data.get_deleter().device; }
};

class Handle {
 public:
  bool Poll() const { return done_.load(std::memory_order_acquire); }
  // Blocks until completion; returns the final status.
  const Status& Wait();
  // Blocks until completion or `timeout`; returns Poll().
  bool WaitFor(std::chrono::milliseconds timeout);
  // The status once Poll() is true.
  const Status& status() const { return status_; }
  // Set by the background thread before Complete (allgather).
  OutputBuffer& output() { return output_; }

  void Complete(Status status);

  // The Runtime's record of blocked waits: Wait and WaitFor enter it while they block.
  void set_watch(std::shared_ptr<WaitWatch> watch) { watch_ = std::move(watch); }

 private:
  std::shared_ptr<WaitWatch> watch_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> done_{false};
  Status status_;
  OutputBuffer output_;
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_HANDLE_H_
