// A persistent host buffer, allocated and touched once and then reused for every fused
// all-reduce (first touch costs ~4 ms/MiB here, docs/machine-notes.md 1). It holds one piece of a
// fused group at a time, so it is KOLO_FUSION_CHUNK_BYTES large and stays in cache.
#ifndef KOLO_FUSION_FUSION_BUFFER_H_
#define KOLO_FUSION_FUSION_BUFFER_H_

#include <cstddef>
#include <memory>

#include "base/status.h"

namespace kolo {

class FusionBuffer {
 public:
  // Grows to at least `bytes` (never shrinks); the memory is written once when allocated.
  Status Reserve(size_t bytes);
  char* data() { return data_.get(); }
  size_t capacity() const { return capacity_; }

 private:
  struct Free {
    void operator()(char* p) const;
  };
  std::unique_ptr<char, Free> data_;
  size_t capacity_ = 0;
};

}  // namespace kolo

#endif  // KOLO_FUSION_FUSION_BUFFER_H_
