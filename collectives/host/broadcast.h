// Broadcast over point-to-point: `root`'s buffer of `bytes` bytes is copied to every rank's.
// Ranks are renumbered relative to the root (v = (r - root) mod p), so both algorithms are
// written for root 0.
//
// Binomial tree (Thakur, Rabenseifner & Gropp 2005, sec. 4.2), for small messages: virtual
// rank v != 0 receives the whole buffer from v - lowbit(v), then sends it to v + 2^k for
// every 2^k below lowbit(v) (below p for v = 0), largest first. ceil(log2 p) rounds; a rank
// sends up to ceil(log2 p) n bytes. Cost ceil(log2 p) (alpha + n beta).
//
// Scatter + ring all-gather (van de Geijn; Barnett et al. 1994; Thakur et al. sec. 4.2), for
// large messages: the buffer is cut into p chunks of ceil(n/p) bytes, chunk j destined to
// virtual rank j. Scatter down the same binomial tree: a rank owning chunks [v, v + 2^k)
// hands the upper half of every range to its child, so each rank ends with its own chunk
// (the root sends (p-1)/p n bytes in total). Then a ring all-gather of the chunks (p - 1
// steps: at step s virtual rank v sends chunk v - s to v + 1 and receives chunk v - s - 1
// from v - 1). Every rank sends about 2 n / p per step; cost
// (ceil(log2 p) + p - 1) alpha + 2 (p-1)/p n beta.
#ifndef KOLO_COLLECTIVES_HOST_BROADCAST_H_
#define KOLO_COLLECTIVES_HOST_BROADCAST_H_

#include <cstddef>

#include "collectives/communicator.h"

namespace kolo {

Status BinomialBroadcast(Communicator& comm, void* buffer, size_t bytes, int root);
Status ScatterAllgatherBroadcast(Communicator& comm, void* buffer, size_t bytes, int root);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_HOST_BROADCAST_H_
