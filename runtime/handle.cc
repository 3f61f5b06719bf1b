#include "runtime/handle.h"

#include "collectives/cuda/device.h"

namespace kolo {

void BufferFree::operator()(void* p) const {
  if (device < 0) {
    std::free(p);
  } else if (stream_ordered && stream != nullptr) {
    FreeOnStream(device, stream, p);
  } else if (stream_ordered) {
    FreeStreamOrderedMemory(device, p);
  } else {
    FreeDeviceMemory(device, p);
  }
}

const Status& Handle::Wait() {
  if (!Poll()) {
    if (watch_) watch_->Enter(this);
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return done_.load(std::memory_order_acquire); });
    }
    if (watch_) watch_->Leave(this);
  }
  return status_;
}

bool Handle::WaitFor(std::chrono::milliseconds timeout) {
  if (Poll()) return true;
  if (watch_) watch_->Enter(this);
  bool done;
  {
    std::unique_lock<std::mutex> lock(mu_);
    done = cv_.wait_for(lock, timeout, [&] { return done_.load(std::memory_order_acquire); });
  }
  if (watch_) watch_->Leave(this);
  return done;
}

void Handle::Complete(Status status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_.load(std::memory_order_relaxed)) return;
    status_ = std::move(status);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

}  // namespace kolo
