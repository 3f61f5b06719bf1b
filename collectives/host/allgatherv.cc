#include "collectives/host/allgatherv.h"

#include <cstring>
#include <string>

namespace kolo {
namespace {

constexpr int kTag = 0x7600;

// Offsets of the blocks (p + 1 entries), after checking the arguments; copies this rank's
// own block into place.
StatusOr<std::vector<size_t>> Prepare(Communicator& comm, const void* send, size_t send_bytes,
                                      void* recv, const std::vector<size_t>& recv_bytes,
                                      const char* name) {
  const int p = comm.Size(), r = comm.Rank();
  if (recv_bytes.size() != static_cast<size_t>(p) || send_bytes != recv_bytes[r]) {
    return InvalidArgumentError(std::string(name) + ": rank " + std::to_string(r) + " sends " +
                                std::to_string(send_bytes) + " bytes, recv_bytes has " +
                                std::to_string(recv_bytes.size()) + " entries for " +
                                std::to_string(p) + " ranks");
  }
  std::vector<size_t> off(p + 1, 0);
  for (int q = 0; q < p; ++q) off[q + 1] = off[q] + recv_bytes[q];
  char* mine = static_cast<char*>(recv) + off[r];
  if (send_bytes && mine != send) std::memcpy(mine, send, send_bytes);
  return off;
}

}  // namespace

Status RingAllgatherv(Communicator& comm, const void* send, size_t send_bytes, void* recv,
                      const std::vector<size_t>& recv_bytes) {
  KOLO_ASSIGN_OR_RETURN(std::vector<size_t> off,
                        Prepare(comm, send, send_bytes, recv, recv_bytes, "ring all-gather"));
  const int p = comm.Size(), r = comm.Rank();
  char* out = static_cast<char*>(recv);
  for (int s = 0; s + 1 < p; ++s) {
    const int give = ((r - s) % p + p) % p, take = ((r - s - 1) % p + p) % p;
    KOLO_RETURN_IF_ERROR(comm.SendRecv(out + off[give], recv_bytes[give], (r + 1) % p,
                                       out + off[take], recv_bytes[take], (r - 1 + p) % p, kTag)
                             .AddContext("ring all-gather step " + std::to_string(s + 1) + "/" +
                                         std::to_string(p - 1)));
  }
  return Status::OK();
}

Status RecursiveDoublingAllgatherv(Communicator& comm, const void* send, size_t send_bytes,
                                   void* recv, const std::vector<size_t>& recv_bytes) {
  const int p = comm.Size(), r = comm.Rank();
  if ((p & (p - 1)) != 0) return RingAllgatherv(comm, send, send_bytes, recv, recv_bytes);
  KOLO_ASSIGN_OR_RETURN(std::vector<size_t> off, Prepare(comm, send, send_bytes, recv, recv_bytes,
                                                         "recursive-doubling all-gather"));
  char* out = static_cast<char*>(recv);
  for (int mask = 1, step = 1; mask < p; mask <<= 1, ++step) {
    const int partner = r ^ mask;
    const int mine = r & ~(mask - 1), theirs = partner & ~(mask - 1);
    KOLO_RETURN_IF_ERROR(
        comm.SendRecv(out + off[mine], off[mine + mask] - off[mine], partner, out + off[theirs],
                      off[theirs + mask] - off[theirs], partner, kTag + 1)
            .AddContext("recursive-doubling all-gather step " + std::to_string(step)));
  }
  return Status::OK();
}

}  // namespace kolo
