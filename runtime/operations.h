// Helpers of the operations beyond allreduce/allgather/broadcast: reducescatter, alltoall and
// barrier (their host Execute functions are in operations.cc too),
// the parts of the operations whose output kolo allocates, and join (runtime/join.cc).
#ifndef KOLO_RUNTIME_OPERATIONS_H_
#define KOLO_RUNTIME_OPERATIONS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/runtime.h"

namespace kolo {

// Rows of a first dimension of `rows` that rank `rank` of `size` receives from a reducescatter:
// Horovod's rule, rows / size each, and the first rows % size ranks one more.
int64_t ReducescatterShare(int64_t rows, int rank, int size);

// An alltoall's splits with the empty "equal split" filled in (call after a successful
// ValidateSubmission, runtime/validate.h).
std::vector<int64_t> ResolvedSplits(const Submission& s, int size);

// Where the parts of the operations whose output kolo allocates go, from a Response and this
// rank's Request: shared by their host paths (runtime.cc, operations.cc) and device paths
// (runtime_device.cc).
struct AllgatherParts {
  std::vector<size_t> bytes;  // rank r's part, in bytes
  int64_t rows = 0;           // the output's first dimension
};
AllgatherParts AllgatherPartsOf(const Response& response, const Request& request);

struct AlltoallParts {
  std::vector<size_t> send_bytes;  // to rank q
  std::vector<size_t> recv_bytes;  // from rank q
  std::vector<int64_t> received;   // rows from rank q (the output's splits)
  int64_t rows = 0;                // the output's first dimension
};
// kInternal when the coordinator's splits disagree with this rank's own.
StatusOr<AlltoallParts> AlltoallPartsOf(const Response& response, const Request& request,
                                        int rank, int size);

// Elements of the reduction each rank receives: its ReducescatterShare of the rows, times the
// row.
std::vector<size_t> ReducescatterCounts(const std::vector<int64_t>& shape, int size);

// Writes `count` copies of the identity of `op` over `dtype` to dst: 0 for Sum and Average,
// the largest value (+inf for floating dtypes) for Min, the lowest (-inf) for Max, 1 for
// Product; bool: false for Sum and Max, true for Min and Product.
void FillIdentity(void* dst, size_t count, DataType dtype, ReduceOp op);
// kInternal (with `what`) when a submitted tensor `e` does not have the `count` elements the
// coordinator's Response gives it (a broken invariant, reported rather than overrun).
Status CheckElementCount(const std::string& what, const TensorEntry& e, size_t count);

// A rank that has joined builds its part of an allreduce Response: the tensors it submitted
// (entries with a handle) are used as they are, the others are identity-filled scratch buffers
// (kept in `scratch`) of the Response's counts, so the job has the same tensors in the same
// order as on every other rank. When the prescale would change the identity (Min, Max,
// Product), the job is run with prescale 1 and the submitted inputs are prescaled into scratch
// copies first.
struct JoinedScratch {
  std::vector<std::unique_ptr<void, OutputBuffer::Free>> buffers;
};
Status JoinedAllreduceJob(const Response& response, const std::vector<TensorEntry>& entries,
                          AllreduceJob* job, JoinedScratch* scratch);

// The same for a device all-reduce (runtime/device/device_join.cc): the identity buffers are on CUDA
// device `device` (the joined rank's own: Runtime::JoinedDevice says which), zeros by
// cudaMemsetAsync or the identity filled on the host and copied, and the prescaled copies of
// Min/Max/Product inputs are made by the batched kernel. Those copies read the submitted
// inputs, so the ready events are waited for here, on kolo's stream of `device`: each is
// consumed (destroyed, and its slot set to nullptr). Host staging of the identities stays in
// `scratch` until the job has run.
Status DeviceJoinedAllreduceJob(const Communicator& comm, const Response& response,
                                const std::vector<TensorEntry>& entries, int device,
                                std::vector<void*>* ready_events, AllreduceJob* job,
                                JoinedScratch* scratch);

}  // namespace kolo

#endif  // KOLO_RUNTIME_OPERATIONS_H_
