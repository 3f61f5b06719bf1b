#include "fusion/fusion_buffer.h"

#include <cstdlib>
#include <cstring>

namespace kolo {

void FusionBuffer::Free::operator()(char* p) const { std::free(p); }

Status FusionBuffer::Reserve(size_t bytes) {
  if (bytes <= capacity_) return Status::OK();
  constexpr size_t kAlign = 64;
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded);
  if (!p) {
    return ResourceExhaustedError("fusion buffer: cannot allocate " + std::to_string(rounded) +
                                  " bytes");
  }
  std::memset(p, 0, rounded);  // the one first touch, here rather than inside a collective
  data_.reset(static_cast<char*>(p));
  capacity_ = rounded;
  return Status::OK();
}

}  // namespace kolo
