// The UCX communicator's collectives (ucx_communicator.h): textbook algorithms over its own
// point-to-point, on control tags (bit 63 of the UCP tag) so they never match an algorithm's
// messages. The negotiation calls them once or twice per cycle with a few KiB, so latency
// (rounds, messages) matters more than bandwidth: binomial trees, recursive doubling, a
// dissemination barrier, and byte strings in one message each (a sized receive, ucx_p2p.cc).
#include <cstring>

#include "collectives/ucx/ucx_communicator.h"

namespace kolo {
namespace {

// Control tags, one per call and phase (calls of one communicator never overlap).
enum ControlTag : int {
  kGatherData = 1,
  kBroadcastData,
  kAndFold,
  kAndExchange,
  kAndResult,
  kBarrierRound,  // + round
};

using Op = UcxCommunicator::Op;

Op ControlRecv(void* buffer, size_t bytes, int peer, int tag) {
  return {P2POp::Kind::kRecv, buffer, bytes, peer, tag, true};
}
Op ControlSend(const void* buffer, size_t bytes, int peer, int tag) {
  return {P2POp::Kind::kSend, const_cast<void*>(buffer), bytes, peer, tag, true};
}
// A receive of whatever length the sender sends, into *into.
Op ControlRecvSized(std::string* into, int peer, int tag) {
  Op op = ControlRecv(nullptr, 0, peer, tag);
  op.sized = into;
  return op;
}

// Binomial tree from `root`: rank (root + v) receives from (root + v - lowbit(v)), then sends
// to (root + v + m) for every power of two m below lowbit(v): ceil(log2 p) rounds. With
// `sized`, the buffer is that string, whose length the root decides.
Status BinomialBroadcast(UcxCommunicator& comm, void* buffer, size_t bytes, std::string* sized,
                         int root, int tag) {
  const int n = comm.Size();
  const int v = (comm.Rank() - root + n) % n;
  int mask = 1;
  while (mask < n) {
    if (v & mask) {
      const int parent = (v - mask + root) % n;
      KOLO_RETURN_IF_ERROR(comm.Run({sized != nullptr ? ControlRecvSized(sized, parent, tag)
                                                      : ControlRecv(buffer, bytes, parent, tag)}));
      break;
    }
    mask <<= 1;
  }
  if (sized != nullptr) {
    buffer = sized->data();
    bytes = sized->size();
  }
  std::vector<Op> sends;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask < n) sends.push_back(ControlSend(buffer, bytes, (v + mask + root) % n, tag));
  }
  return comm.Run(sends);
}

Status CheckRoot(const UcxCommunicator& comm, int root, const char* call) {
  if (root >= 0 && root < comm.Size()) return Status::OK();
  return InvalidArgumentError(std::string(call) + ": root " + std::to_string(root) +
                              " is not a rank of " + std::to_string(comm.Size()));
}

}  // namespace

Status UcxCommunicator::Broadcast(void* buffer, size_t bytes, int root) {
  KOLO_RETURN_IF_ERROR(CheckRoot(*this, root, "UCX Broadcast"));
  if (bytes == 0 || Size() == 1) return Status::OK();
  return BinomialBroadcast(*this, buffer, bytes, nullptr, root, kBroadcastData)
      .AddContext("UCX Broadcast from rank " + std::to_string(root));
}

Status UcxCommunicator::BroadcastBytes(std::string* bytes, int root) {
  KOLO_RETURN_IF_ERROR(CheckRoot(*this, root, "UCX BroadcastBytes"));
  if (Size() == 1) return Status::OK();
  return BinomialBroadcast(*this, nullptr, 0, bytes, root, kBroadcastData)
      .AddContext("UCX BroadcastBytes from rank " + std::to_string(root));
}

Status UcxCommunicator::GatherBytes(const std::string& mine, std::vector<std::string>* all,
                                    int root) {
  KOLO_RETURN_IF_ERROR(CheckRoot(*this, root, "UCX GatherBytes"));
  const int n = Size();
  if (Rank() != root) {
    return Run({ControlSend(mine.data(), mine.size(), root, kGatherData)})
        .AddContext("UCX GatherBytes to rank " + std::to_string(root));
  }
  all->assign(n, std::string());
  (*all)[root] = mine;
  std::vector<Op> ops;
  for (int r = 0; r < n; ++r) {
    if (r != root) ops.push_back(ControlRecvSized(&(*all)[r], r, kGatherData));
  }
  return Run(ops).AddContext("UCX GatherBytes");
}

Status UcxCommunicator::AndBits(uint64_t* words, size_t count) {
  // Recursive doubling over the largest power of two p2 <= n: log2(p2) rounds in which each
  // rank exchanges its words with one partner, where a gather and a broadcast take twice as
  // many. The first 2 (n - p2) ranks pair up first: the even one hands its words to the odd one
  // (which takes part for both) and gets the result back at the end.
  const int n = Size();
  if (count == 0 || n == 1) return Status::OK();
  const size_t bytes = count * sizeof(uint64_t);
  std::vector<uint64_t> theirs(count);
  const auto fold = [&] {
    for (size_t i = 0; i < count; ++i) words[i] &= theirs[i];
  };
  int p2 = 1;
  while (p2 * 2 <= n) p2 *= 2;
  const int extra = n - p2;
  const int me = Rank();
  if (me < 2 * extra && me % 2 == 0) {
    KOLO_RETURN_IF_ERROR(Run({ControlSend(words, bytes, me + 1, kAndFold),
                              ControlRecv(theirs.data(), bytes, me + 1, kAndResult)})
                             .AddContext("UCX AndBits through rank " + std::to_string(me + 1)));
    std::memcpy(words, theirs.data(), bytes);
    return Status::OK();
  }
  if (me < 2 * extra) {
    KOLO_RETURN_IF_ERROR(Run({ControlRecv(theirs.data(), bytes, me - 1, kAndFold)})
                             .AddContext("UCX AndBits from rank " + std::to_string(me - 1)));
    fold();
  }
  const int v = me < 2 * extra ? me / 2 : me - extra;  // rank among the p2
  for (int mask = 1; mask < p2; mask <<= 1) {
    const int pv = v ^ mask;
    const int peer = pv < extra ? pv * 2 + 1 : pv + extra;
    KOLO_RETURN_IF_ERROR(Run({ControlRecv(theirs.data(), bytes, peer, kAndExchange),
                              ControlSend(words, bytes, peer, kAndExchange)})
                             .AddContext("UCX AndBits with rank " + std::to_string(peer)));
    fold();
  }
  if (me < 2 * extra) {
    return Run({ControlSend(words, bytes, me - 1, kAndResult)})
        .AddContext("UCX AndBits to rank " + std::to_string(me - 1));
  }
  return Status::OK();
}

Status UcxCommunicator::Barrier() {
  // Dissemination: in round k every rank signals rank + 2^k and hears from rank - 2^k; after
  // ceil(log2 p) rounds each rank has (transitively) heard from all. Empty messages.
  const int n = Size();
  char unused = 0;
  int round = 0;
  for (int k = 1; k < n; k <<= 1, ++round) {
    const int to = (Rank() + k) % n, from = (Rank() - k + n) % n;
    KOLO_RETURN_IF_ERROR(Run({ControlRecv(&unused, 0, from, kBarrierRound + round),
                              ControlSend(&unused, 0, to, kBarrierRound + round)})
                             .AddContext("UCX Barrier round " + std::to_string(round + 1)));
  }
  return Status::OK();
}

}  // namespace kolo
