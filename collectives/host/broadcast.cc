#include "collectives/host/broadcast.h"

#include <algorithm>
#include <string>

namespace kolo {
namespace {

constexpr int kTagTree = 0x7700, kTagRing = 0x7701;

Status CheckRoot(const Communicator& comm, int root, const char* name) {
  if (root < 0 || root >= comm.Size()) {
    return InvalidArgumentError(std::string(name) + ": root " + std::to_string(root) +
                                " is not a rank of " + std::to_string(comm.Size()));
  }
  return Status::OK();
}

}  // namespace

Status BinomialBroadcast(Communicator& comm, void* buffer, size_t bytes, int root) {
  KOLO_RETURN_IF_ERROR(CheckRoot(comm, root, "binomial broadcast"));
  const int p = comm.Size();
  const int v = (comm.Rank() - root + p) % p;
  auto real = [&](int virt) { return (virt + root) % p; };
  int mask = 1;
  while (mask < p && !(v & mask)) mask <<= 1;
  if (v != 0) {
    KOLO_RETURN_IF_ERROR(
        comm.SendRecv(nullptr, 0, 0, buffer, bytes, real(v - mask), kTagTree)
            .AddContext("binomial broadcast: receive from rank " + std::to_string(real(v - mask))));
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask >= p) continue;
    KOLO_RETURN_IF_ERROR(
        comm.SendRecv(buffer, bytes, real(v + mask), nullptr, 0, 0, kTagTree)
            .AddContext("binomial broadcast: send to rank " + std::to_string(real(v + mask))));
  }
  return Status::OK();
}

Status ScatterAllgatherBroadcast(Communicator& comm, void* buffer, size_t bytes, int root) {
  KOLO_RETURN_IF_ERROR(CheckRoot(comm, root, "scatter-allgather broadcast"));
  const int p = comm.Size();
  if (p == 1) return Status::OK();
  const int v = (comm.Rank() - root + p) % p;
  auto real = [&](int virt) { return ((virt % p) + p + root) % p; };
  char* buf = static_cast<char*>(buffer);
  const size_t chunk = (bytes + p - 1) / p;
  // Byte offset of chunk j (j = p: the end).
  auto at = [&](int j) { return std::min(bytes, static_cast<size_t>(j) * chunk); };

  // Scatter: receive chunks [v, v + lowbit(v)) from the parent, hand halves to the children.
  int mask = 1;
  while (mask < p && !(v & mask)) mask <<= 1;
  if (v != 0) {
    const int end = std::min(v + mask, p);
    KOLO_RETURN_IF_ERROR(
        comm.SendRecv(nullptr, 0, 0, buf + at(v), at(end) - at(v), real(v - mask), kTagTree)
            .AddContext("scatter-allgather broadcast: scatter"));
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask >= p) continue;
    const int begin = v + mask, end = std::min(v + 2 * mask, p);
    KOLO_RETURN_IF_ERROR(
        comm.SendRecv(buf + at(begin), at(end) - at(begin), real(begin), nullptr, 0, 0, kTagTree)
            .AddContext("scatter-allgather broadcast: scatter"));
  }

  // Ring all-gather of the chunks, in virtual-rank order.
  for (int s = 0; s + 1 < p; ++s) {
    const int give = ((v - s) % p + p) % p, take = ((v - s - 1) % p + p) % p;
    KOLO_RETURN_IF_ERROR(comm.SendRecv(buf + at(give), at(give + 1) - at(give), real(v + 1),
                                       buf + at(take), at(take + 1) - at(take), real(v - 1),
                                       kTagRing)
                             .AddContext("scatter-allgather broadcast: all-gather step " +
                                         std::to_string(s + 1) + "/" + std::to_string(p - 1)));
  }
  return Status::OK();
}

}  // namespace kolo
