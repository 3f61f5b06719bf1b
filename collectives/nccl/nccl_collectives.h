// The NCCL collectives of the runtime's device path beyond all-reduce, on GPU
// buffers of one device. Each enqueues on kolo's stream of `device` (nccl_comm.h), under an
// NcclLease that ends before it returns, and returns without waiting: the caller queues its
// own work around it on the same stream and waits once, or (the runtime) hands the stream's
// completion to its finaliser (runtime/device/device_finaliser.h). `comm` is the kolo Communicator
// whose ranks take part (its NCCL communicator is made on first use, collectively). Parts and
// offsets follow nccl_plan.h, which explains the choices. Built only with NCCL.
#ifndef KOLO_COLLECTIVES_NCCL_NCCL_COLLECTIVES_H_
#define KOLO_COLLECTIVES_NCCL_NCCL_COLLECTIVES_H_

#include <cstddef>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "collectives/communicator.h"

namespace kolo {

// ncclBroadcast of `bytes` bytes from `root`'s buffer into every rank's, in place.
Status EnqueueNcclBroadcast(Communicator& comm, int device, void* buffer, size_t bytes, int root);

// Rank r contributes part_bytes[r] bytes (send holds this rank's); recv receives every part,
// in rank order. Equal parts: ncclAllGather; unequal: grouped ncclBroadcast per rank.
Status EnqueueNcclAllgatherv(Communicator& comm, int device, const void* send, void* recv,
                             const std::vector<size_t>& part_bytes);

// This rank sends send_bytes[q] bytes (consecutive blocks of send, in rank order) to rank q and
// receives recv_bytes[q] from q into consecutive blocks of recv: ncclSend/ncclRecv pairs in one
// group (to itself too, so one rank still goes through NCCL).
Status EnqueueNcclAlltoallv(Communicator& comm, int device, const void* send,
                            const std::vector<size_t>& send_bytes, void* recv,
                            const std::vector<size_t>& recv_bytes);

// ncclReduceScatter: send holds Size() * count elements, recv receives this rank's count
// reduced. kUnimplemented for a dtype or op NCCL has not.
Status EnqueueNcclReduceScatter(Communicator& comm, int device, const void* send, void* recv,
                                size_t count, DataType dtype, ReduceOp op);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_NCCL_NCCL_COLLECTIVES_H_
