// The transport interface every collective algorithm and the negotiation run over. A backend
// (MPI, the in-process loopback of the thread world, later NCCL/UCX) implements the primitives
// it has; the rest answer kUnimplemented "<backend> has no native X", so the Selector can move
// on. Sizes are in bytes or elements as named, 64-bit: implementations split calls whose
// counts exceed their library's int limits.
//
// Threading: a Communicator is used by one thread at a time (kolo's background thread).
#ifndef KOLO_COLLECTIVES_COMMUNICATOR_H_
#define KOLO_COLLECTIVES_COMMUNICATOR_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"

namespace kolo {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int Rank() const = 0;
  virtual int Size() const = 0;
  // "mpi", "loopback": for logs, errors and algorithm names.
  virtual std::string_view BackendName() const = 0;

  // Sends send_bytes to `dst` and receives recv_bytes from `src` with `tag`, concurrently.
  virtual Status SendRecv(const void* send, size_t send_bytes, int dst, void* recv,
                          size_t recv_bytes, int src, int tag);

  // The library's own all-reduce of `count` elements; send == recv means in place. `op` is
  // kSum, kMin, kMax or kProduct (Average is Sum plus a division done by the caller).
  virtual Status Allreduce(const void* send, void* recv, size_t count, DataType dtype,
                           ReduceOp op);
  // Rank r contributes recv_bytes[r] bytes (send_bytes == recv_bytes[Rank()]); recv receives
  // all contributions concatenated in rank order.
  virtual Status Allgatherv(const void* send, size_t send_bytes, void* recv,
                            const std::vector<size_t>& recv_bytes);
  // Reduce-scatter: every rank contributes sum(counts) elements; rank r receives in `recv` the
  // reduction of elements [sum(counts[0..r)), +counts[r]) of every rank. `op` as Allreduce;
  // send and recv do not overlap.
  virtual Status ReduceScatter(const void* send, void* recv, const std::vector<size_t>& counts,
                               DataType dtype, ReduceOp op);
  // All-to-all, in bytes: this rank sends send_bytes[q] bytes (consecutive blocks of `send`, in
  // rank order) to rank q, and receives recv_bytes[q] bytes from rank q into consecutive blocks
  // of `recv`, in rank order. send and recv do not overlap.
  virtual Status Alltoallv(const void* send, const std::vector<size_t>& send_bytes, void* recv,
                           const std::vector<size_t>& recv_bytes);
  // `root`'s buffer of `bytes` bytes is copied to every rank's buffer.
  virtual Status Broadcast(void* buffer, size_t bytes, int root);
  virtual Status Barrier();

  // Control plane of the negotiation: variable-size byte strings.
  // On `root`, *all receives every rank's string in rank order; elsewhere it is untouched.
  virtual Status GatherBytes(const std::string& mine, std::vector<std::string>* all, int root);
  // `root`'s *bytes replaces every other rank's *bytes.
  virtual Status BroadcastBytes(std::string* bytes, int root);
  // Bitwise AND of `count` 64-bit words over all ranks, in place (the response cache's
  // readiness bits, runtime/controller.cc).
  virtual Status AndBits(uint64_t* words, size_t count);

 protected:
  Status NoNative(std::string_view what) const;
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_COMMUNICATOR_H_
