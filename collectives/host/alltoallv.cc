#include "collectives/host/alltoallv.h"

#include <cstring>
#include <string>

namespace kolo {

Status PairwiseAlltoallv(Communicator& comm, const void* send,
                         const std::vector<size_t>& send_bytes, void* recv,
                         const std::vector<size_t>& recv_bytes) {
  constexpr int kTag = 0x7900;
  const int p = comm.Size(), r = comm.Rank();
  if (send_bytes.size() != static_cast<size_t>(p) || recv_bytes.size() != static_cast<size_t>(p)) {
    return InvalidArgumentError("pairwise all-to-all: " + std::to_string(send_bytes.size()) +
                                " send and " + std::to_string(recv_bytes.size()) +
                                " receive sizes for " + std::to_string(p) + " ranks");
  }
  if (send_bytes[r] != recv_bytes[r]) {
    return InvalidArgumentError("pairwise all-to-all: rank " + std::to_string(r) + " sends " +
                                "itself " + std::to_string(send_bytes[r]) + " bytes but expects " +
                                std::to_string(recv_bytes[r]));
  }
  std::vector<size_t> soff(p + 1, 0), roff(p + 1, 0);
  for (int q = 0; q < p; ++q) {
    soff[q + 1] = soff[q] + send_bytes[q];
    roff[q + 1] = roff[q] + recv_bytes[q];
  }
  const char* out = static_cast<const char*>(send);
  char* in = static_cast<char*>(recv);
  if (send_bytes[r]) std::memcpy(in + roff[r], out + soff[r], send_bytes[r]);
  for (int s = 1; s < p; ++s) {
    const int dst = (r + s) % p, src = (r - s + p) % p;
    KOLO_RETURN_IF_ERROR(comm.SendRecv(out + soff[dst], send_bytes[dst], dst, in + roff[src],
                                       recv_bytes[src], src, kTag)
                             .AddContext("pairwise all-to-all step " + std::to_string(s) + "/" +
                                         std::to_string(p - 1)));
  }
  return Status::OK();
}

}  // namespace kolo
