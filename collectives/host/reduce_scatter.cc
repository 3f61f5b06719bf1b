#include "collectives/host/reduce_scatter.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "collectives/reduce.h"

namespace kolo {

Status RingReduceScatter(Communicator& comm, const void* send, void* recv,
                         const std::vector<size_t>& counts, DataType dtype, ReduceOp op,
                         std::vector<char>* scratch, size_t segment_bytes) {
  constexpr int kTag = 0x7800;
  const int p = comm.Size(), r = comm.Rank();
  if (counts.size() != static_cast<size_t>(p)) {
    return InvalidArgumentError("ring reduce-scatter: " + std::to_string(counts.size()) +
                                " counts for " + std::to_string(p) + " ranks");
  }
  const size_t esize = DataTypeSize(dtype);
  const char* in = static_cast<const char*>(send);
  std::vector<size_t> off(p + 1, 0);
  for (int q = 0; q < p; ++q) off[q + 1] = off[q] + counts[q];
  if (p == 1) {
    if (counts[0]) std::memcpy(recv, send, counts[0] * esize);
    return Status::OK();
  }
  const size_t max_block = *std::max_element(counts.begin(), counts.end()) * esize;
  if (scratch->size() < 2 * max_block) scratch->resize(2 * max_block);
  const size_t seg = std::max<size_t>(1, segment_bytes / esize);
  const int right = (r + 1) % p, left = (r - 1 + p) % p;
  auto block = [&](int s) { return ((r - 1 - s) % p + p) % p; };  // sent at step s

  // sends[s % 2]: started at step s from scratch slot s % 2 (step 0's own data: slot 1).
  std::vector<std::unique_ptr<P2PBatch>> sends[2];
  auto send_segments = [&](const char* base, size_t count,
                           std::vector<std::unique_ptr<P2PBatch>>* to) -> Status {
    for (size_t j = 0; j < count; j += seg) {
      KOLO_ASSIGN_OR_RETURN(
          auto b, comm.Start({P2POp::Send(base + j * esize, std::min(seg, count - j) * esize, right,
                                          kTag)}));
      to->push_back(std::move(b));
    }
    return Status::OK();
  };
  auto drain = [](std::vector<std::unique_ptr<P2PBatch>>* batches) -> Status {
    for (auto& b : *batches) KOLO_RETURN_IF_ERROR(b->Wait());
    batches->clear();
    return Status::OK();
  };
  KOLO_RETURN_IF_ERROR(send_segments(in + off[block(0)] * esize, counts[block(0)], &sends[1])
                           .AddContext("ring reduce-scatter step 1/" + std::to_string(p - 1)));

  std::vector<std::unique_ptr<P2PBatch>> recvs;
  for (int s = 0; s + 1 < p; ++s) {
    const std::string where =
        "ring reduce-scatter step " + std::to_string(s + 1) + "/" + std::to_string(p - 1);
    const bool last = s + 2 == p;
    const int b = block(s + 1);
    const size_t count = counts[b];
    // Slot s % 2 is about to be overwritten: the sends from it two steps ago must be done.
    KOLO_RETURN_IF_ERROR(drain(&sends[s % 2]).AddContext(where));
    char* acc = last ? static_cast<char*>(recv) : scratch->data() + (s % 2) * max_block;
    recvs.clear();
    for (size_t j = 0; j < count; j += seg) {
      KOLO_ASSIGN_OR_RETURN(
          auto batch,
          comm.Start({P2POp::Recv(acc + j * esize, std::min(seg, count - j) * esize, left, kTag)}));
      recvs.push_back(std::move(batch));
    }
    for (size_t j = 0, k = 0; j < count; j += seg, ++k) {
      const size_t n = std::min(seg, count - j);
      KOLO_RETURN_IF_ERROR(
          recvs[k]->Wait().AddContext(where + " from rank " + std::to_string(left)));
      KOLO_RETURN_IF_ERROR(ReduceInto(acc + j * esize, in + (off[b] + j) * esize, n, dtype, op));
      if (!last) {
        KOLO_ASSIGN_OR_RETURN(auto sb,
                              comm.Start({P2POp::Send(acc + j * esize, n * esize, right, kTag)}));
        sends[s % 2].push_back(std::move(sb));
      }
    }
  }
  KOLO_RETURN_IF_ERROR(drain(&sends[0]).AddContext("ring reduce-scatter"));
  return drain(&sends[1]).AddContext("ring reduce-scatter");
}

}  // namespace kolo
