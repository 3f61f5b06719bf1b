// All-to-all(v) by pairwise exchange (Thakur, Rabenseifner & Gropp 2005, sec. 4.5), in bytes:
// rank r sends send_bytes[q] bytes (consecutive blocks of `send`, rank order) to rank q and
// receives recv_bytes[q] bytes from q into consecutive blocks of `recv`. send and recv do not
// overlap.
//
// Steps s = 0..p-1: rank r sends its block for (r + s) mod p and receives the block from
// (r - s) mod p; step 0 is the local copy. Every pair exchanges exactly once and no rank is
// the target of two senders in one step. Bytes per rank: sends n - n_rr, receives its blocks.
// Cost: (p-1) alpha + (p-1)/p n beta for equal blocks (n: bytes each rank sends in all).
#ifndef KOLO_COLLECTIVES_HOST_ALLTOALLV_H_
#define KOLO_COLLECTIVES_HOST_ALLTOALLV_H_

#include <cstddef>
#include <vector>

#include "collectives/communicator.h"

namespace kolo {

Status PairwiseAlltoallv(Communicator& comm, const void* send,
                         const std::vector<size_t>& send_bytes, void* recv,
                         const std::vector<size_t>& recv_bytes);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_HOST_ALLTOALLV_H_
