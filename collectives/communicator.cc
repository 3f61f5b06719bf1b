#include "collectives/communicator.h"

#include <atomic>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "collectives/node_context.h"

namespace kolo {

namespace {
std::atomic<uint64_t (*)()> g_serial_source{nullptr};
}  // namespace

uint64_t NextCommunicatorSerial() {
  static std::atomic<uint64_t> last{0};
  return ++last;
}

void SetCommunicatorSerialSource(uint64_t (*source)()) { g_serial_source = source; }

uint64_t Communicator::NextSerial() {
  uint64_t (*source)() = g_serial_source.load();
  return source != nullptr ? source() : NextCommunicatorSerial();
}

void Communicator::set_node(std::shared_ptr<NodeContext> node) {
  node_ = std::move(node);
  if (!node_) return;
  if (node_->local) node_->local->order_serial_ = order_serial();
  if (node_->cross) node_->cross->order_serial_ = order_serial();
}

Status Communicator::NoNative(std::string_view what) const {
  return UnimplementedError(std::string(BackendName()) + " has no native " + std::string(what));
}

// One batch of the two transfers, so a backend's Start (and the liveness and progress checks
// of its Wait) serves both. Empty messages are not sent: both sides know the sizes.
Status Communicator::SendRecv(const void* send, size_t send_bytes, int dst, void* recv,
                              size_t recv_bytes, int src, int tag) {
  std::vector<P2POp> ops;
  ops.reserve(2);
  if (recv_bytes > 0) ops.push_back(P2POp::Recv(recv, recv_bytes, src, tag));
  if (send_bytes > 0) ops.push_back(P2POp::Send(send, send_bytes, dst, tag));
  if (ops.empty()) return Status::OK();
  KOLO_ASSIGN_OR_RETURN(std::unique_ptr<P2PBatch> batch, Start(ops));
  return batch->Wait();
}
StatusOr<std::unique_ptr<P2PBatch>> Communicator::Start(const std::vector<P2POp>&) {
  return NoNative("non-blocking point-to-point");
}
StatusOr<std::unique_ptr<SharedSegment>> Communicator::AllocateShared(size_t) {
  return NoNative("shared memory");
}
Status Communicator::Allreduce(const void*, void*, size_t, DataType, ReduceOp) {
  return NoNative("Allreduce");
}
Status Communicator::Allgatherv(const void*, size_t, void*, const std::vector<size_t>&) {
  return NoNative("Allgatherv");
}
Status Communicator::ReduceScatter(const void*, void*, const std::vector<size_t>&, DataType,
                                   ReduceOp) {
  return NoNative("ReduceScatter");
}
Status Communicator::Alltoallv(const void*, const std::vector<size_t>&, void*,
                               const std::vector<size_t>&) {
  return NoNative("Alltoallv");
}
Status Communicator::Broadcast(void*, size_t, int) { return NoNative("Broadcast"); }
Status Communicator::Barrier() { return NoNative("Barrier"); }
Status Communicator::GatherBytes(const std::string&, std::vector<std::string>*, int) {
  return NoNative("GatherBytes");
}
Status Communicator::BroadcastBytes(std::string*, int) { return NoNative("BroadcastBytes"); }
Status Communicator::AndBits(uint64_t*, size_t) { return NoNative("AndBits"); }

Status Communicator::GatherWords(const uint64_t* mine, size_t count, uint64_t* all, int root) {
  const size_t bytes = count * sizeof(uint64_t);
  std::vector<std::string> gathered;
  KOLO_RETURN_IF_ERROR(
      GatherBytes(std::string(reinterpret_cast<const char*>(mine), bytes), &gathered, root));
  if (Rank() != root) return Status::OK();
  for (size_t r = 0; r < gathered.size(); ++r) {
    if (gathered[r].size() != bytes) {
      return InternalError("GatherWords: rank " + std::to_string(r) + " sent " +
                           std::to_string(gathered[r].size()) + " bytes, expected " +
                           std::to_string(bytes));
    }
    std::memcpy(all + r * count, gathered[r].data(), bytes);
  }
  return Status::OK();
}

}  // namespace kolo
