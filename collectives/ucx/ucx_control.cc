// The UCX communicator's collectives (ucx_communicator.h): textbook algorithms over its own
// point-to-point, on control tags (bit 63 of the UCP tag) so they never match an algorithm's
// messages. The negotiation calls them once or twice per cycle with a few KiB, so latency
// (rounds) matters more than bandwidth: binomial trees, a dissemination barrier.
#include <cstring>

#include "collectives/ucx/ucx_communicator.h"

namespace kolo {
namespace {

// Control tags, one per call and phase (calls of one communicator never overlap).
enum ControlTag : int {
  kGatherLength = 1,
  kGatherData,
  kBroadcastLength,
  kBroadcastData,
  kAndGather,
  kAndBroadcast,
  kBarrierRound,  // + round
};

using Op = UcxCommunicator::Op;

Op ControlRecv(void* buffer, size_t bytes, int peer, int tag) {
  return {P2POp::Kind::kRecv, buffer, bytes, peer, tag, true};
}
Op ControlSend(const void* buffer, size_t bytes, int peer, int tag) {
  return {P2POp::Kind::kSend, const_cast<void*>(buffer), bytes, peer, tag, true};
}

// Binomial tree from `root`: rank (root + v) receives from (root + v - lowbit(v)), then sends
// to (root + v + m) for every power of two m below lowbit(v): ceil(log2 p) rounds.
Status BinomialBroadcast(UcxCommunicator& comm, void* buffer, size_t bytes, int root, int tag) {
  const int n = comm.Size();
  const int v = (comm.Rank() - root + n) % n;
  int mask = 1;
  while (mask < n) {
    if (v & mask) {
      const int parent = (v - mask + root) % n;
      KOLO_RETURN_IF_ERROR(comm.Run({ControlRecv(buffer, bytes, parent, tag)}));
      break;
    }
    mask <<= 1;
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
  return BinomialBroadcast(*this, buffer, bytes, root, kBroadcastData)
      .AddContext("UCX Broadcast from rank " + std::to_string(root));
}

Status UcxCommunicator::BroadcastBytes(std::string* bytes, int root) {
  KOLO_RETURN_IF_ERROR(CheckRoot(*this, root, "UCX BroadcastBytes"));
  if (Size() == 1) return Status::OK();
  uint64_t length = Rank() == root ? bytes->size() : 0;
  KOLO_RETURN_IF_ERROR(BinomialBroadcast(*this, &length, sizeof(length), root, kBroadcastLength)
                           .AddContext("UCX BroadcastBytes length"));
  if (Rank() != root) bytes->resize(length);
  if (length == 0) return Status::OK();
  return BinomialBroadcast(*this, bytes->data(), length, root, kBroadcastData)
      .AddContext("UCX BroadcastBytes from rank " + std::to_string(root));
}

Status UcxCommunicator::GatherBytes(const std::string& mine, std::vector<std::string>* all,
                                    int root) {
  KOLO_RETURN_IF_ERROR(CheckRoot(*this, root, "UCX GatherBytes"));
  const int n = Size();
  if (Rank() != root) {
    // Length first, then the bytes: one sender and tag space, so they arrive in this order.
    const uint64_t length = mine.size();
    std::vector<Op> ops = {ControlSend(&length, sizeof(length), root, kGatherLength)};
    if (length > 0) ops.push_back(ControlSend(mine.data(), length, root, kGatherData));
    return Run(ops).AddContext("UCX GatherBytes to rank " + std::to_string(root));
  }
  std::vector<uint64_t> lengths(n, 0);
  std::vector<Op> ops;
  for (int r = 0; r < n; ++r) {
    if (r != root) ops.push_back(ControlRecv(&lengths[r], sizeof(uint64_t), r, kGatherLength));
  }
  KOLO_RETURN_IF_ERROR(Run(ops).AddContext("UCX GatherBytes lengths"));
  all->assign(n, std::string());
  ops.clear();
  for (int r = 0; r < n; ++r) {
    if (r == root) {
      (*all)[r] = mine;
    } else if (lengths[r] > 0) {
      (*all)[r].resize(lengths[r]);
      ops.push_back(ControlRecv((*all)[r].data(), lengths[r], r, kGatherData));
    }
  }
  return Run(ops).AddContext("UCX GatherBytes data");
}

Status UcxCommunicator::AndBits(uint64_t* words, size_t count) {
  const int n = Size();
  if (count == 0 || n == 1) return Status::OK();
  const size_t bytes = count * sizeof(uint64_t);
  if (Rank() != 0) {
    KOLO_RETURN_IF_ERROR(
        Run({ControlSend(words, bytes, 0, kAndGather)}).AddContext("UCX AndBits gather"));
  } else {
    std::vector<uint64_t> theirs(count * (n - 1));
    std::vector<Op> ops;
    for (int r = 1; r < n; ++r) {
      ops.push_back(ControlRecv(theirs.data() + (r - 1) * count, bytes, r, kAndGather));
    }
    KOLO_RETURN_IF_ERROR(Run(ops).AddContext("UCX AndBits gather"));
    for (int r = 1; r < n; ++r) {
      for (size_t i = 0; i < count; ++i) words[i] &= theirs[(r - 1) * count + i];
    }
  }
  return BinomialBroadcast(*this, words, bytes, 0, kAndBroadcast)
      .AddContext("UCX AndBits broadcast");
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
