// All-gather(v) over point-to-point: rank r contributes recv_bytes[r] bytes (send_bytes must
// equal it); every rank receives all contributions concatenated in rank order. `send` may be
// recv + offset of this rank's block (in place); otherwise it must not overlap recv.
//
// Ring (Thakur, Rabenseifner & Gropp 2005, sec. 4.1): p - 1 steps; at step s rank r sends
// block (r - s) mod p to r + 1 and receives block (r - s - 1) mod p from r - 1. Each rank
// sends and receives n - n_r bytes (n: the whole result). Cost (p-1) alpha + (p-1)/p n beta
// for equal blocks.
//
// Recursive doubling (same source, sec. 4.1), p a power of two: log2 p steps; at step k rank
// r exchanges with r xor 2^k the 2^k contiguous blocks its group of 2^k ranks has gathered so
// far (blocks [r & ~(2^k - 1), +2^k)). Same bytes as the ring, log2 p messages: cost
// log2(p) alpha + (p-1)/p n beta. Other p: the ring.
#ifndef KOLO_COLLECTIVES_HOST_ALLGATHERV_H_
#define KOLO_COLLECTIVES_HOST_ALLGATHERV_H_

#include <cstddef>
#include <vector>

#include "collectives/communicator.h"

namespace kolo {

Status RingAllgatherv(Communicator& comm, const void* send, size_t send_bytes, void* recv,
                      const std::vector<size_t>& recv_bytes);
Status RecursiveDoublingAllgatherv(Communicator& comm, const void* send, size_t send_bytes,
                                   void* recv, const std::vector<size_t>& recv_bytes);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_HOST_ALLGATHERV_H_
