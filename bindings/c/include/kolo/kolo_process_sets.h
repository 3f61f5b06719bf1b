/* kolo's process sets (Horovod's): part of the C API of kolo.h, which includes this header
 * inside its extern "C" block, after the types it uses. Include kolo.h, not this file. */
#ifndef KOLO_KOLO_PROCESS_SETS_H_
#define KOLO_KOLO_PROCESS_SETS_H_

#ifndef KOLO_KOLO_H_
#error "include <kolo/kolo.h>, which includes this header"
#endif

/* ---- process sets (Horovod's) -------------------------------------------------------------- */

/* Process set 0 is every rank (the operations above use it). kolo_add_process_set creates a set
 * of `nranks` ranks (any order; stored ascending) with a negotiation and data path of its own:
 * operations on it (the *_on functions below, called by its members only) never wait on ranks
 * outside it, and may run concurrently with operations on other sets. It is collective over every
 * rank of the job (members and non-members alike, like Horovod's add_process_set), and every rank
 * must pass the same ranks. *process_set_id receives the new id (> 0, the same on every rank).
 * Error messages in kolo_last_error(); inside a set, "rank r" means the r-th member.
 * Errors: KOLO_ERR_INVALID_ARGUMENT (empty list, a rank outside [0, size) or named twice, the
 * ranks' lists differ — "ranks 0,1 passed [0,1], rank 2 passed [0,2]" —, or a set with these
 * ranks exists), KOLO_ERR_FAILED_PRECONDITION (not initialised). */
KOLO_API kolo_status_t kolo_add_process_set(const int* ranks, int nranks, int* process_set_id);
/* Removes a set; collective over every rank, all passing the same id. The members' pending
 * operations on it fail with KOLO_ERR_FAILED_PRECONDITION. Errors: KOLO_ERR_INVALID_ARGUMENT
 * (unknown id, id 0, or ids differ across ranks: "remove_process_set(1): every rank must remove
 * the same process set: rank 0 removes 1, ranks 1,2 remove 2"), KOLO_ERR_FAILED_PRECONDITION.
 * Adding and removing are agreed through set 0's negotiation (an all-gather of every rank's call
 * under the name "__kolo_process_set_calls"), so a rank that never calls fails as a missing rank
 * of any operation does: KOLO_ERR_DEADLINE_EXCEEDED within seconds when it waits for another
 * operation instead (the deadlock check), or after KOLO_STALL_SHUTDOWN_TIME_SECONDS; the table is
 * then unchanged on every rank and the next operation works. */
KOLO_API kolo_status_t kolo_remove_process_set(int process_set_id);
/* This rank's rank inside the set, or -1 when it is not a member (or the set is unknown). */
KOLO_API int kolo_process_set_rank(int process_set_id);
/* The set's number of ranks, or -1 when the set is unknown. */
KOLO_API int kolo_process_set_size(int process_set_id);
/* Writes the set's kolo_process_set_size() ranks, ascending, to ranks[]. */
KOLO_API kolo_status_t kolo_process_set_ranks(int process_set_id, int* ranks);

/* The operations on a process set: the same arguments and errors as the functions without the
 * suffix (ranks such as root_rank and the entries of splits are ranks inside the set), plus
 * KOLO_ERR_INVALID_ARGUMENT when the set is unknown or the calling rank is not a member. */
KOLO_API kolo_status_t kolo_allreduce_async_on(int process_set_id, const char* name,
                                               const void* input, void* output,
                                               kolo_dtype_t dtype, int ndim,
                                               const int64_t* shape, kolo_reduce_op_t op,
                                               double prescale_factor, double postscale_factor,
                                               kolo_handle_t* handle);
/* As kolo_allreduce_async_on, for tensors in CUDA device memory written by work queued on a
 * CUDA stream: kolo records an event on `cuda_stream` (a cudaStream_t; NULL: CUDA's legacy
 * default stream, cudaStreamLegacy, which also waits for per-thread default streams) now, and
 * its own stream waits for it before reading `input`, so the caller need not synchronize. input
 * and output must be in the same memory (both host, or both on one device; kolo asks CUDA, as every
 * submission does). For host tensors the stream is ignored. Every operation has a device path
 * through NCCL (README.md, "GPU path"); reductions of int16, uint16 or bool CUDA tensors, and
 * Average of integer ones, fail at submission with KOLO_ERR_INVALID_ARGUMENT (NCCL cannot).
 * Builds without CUDA return KOLO_ERR_UNIMPLEMENTED for a non-NULL stream. */
KOLO_API kolo_status_t kolo_allreduce_async_on_stream(int process_set_id, const char* name,
                                                      const void* input, void* output,
                                                      kolo_dtype_t dtype, int ndim,
                                                      const int64_t* shape, kolo_reduce_op_t op,
                                                      double prescale_factor,
                                                      double postscale_factor, void* cuda_stream,
                                                      kolo_handle_t* handle);
KOLO_API kolo_status_t kolo_allgather_async_on(int process_set_id, const char* name,
                                               const void* input, kolo_dtype_t dtype, int ndim,
                                               const int64_t* shape, kolo_handle_t* handle);
KOLO_API kolo_status_t kolo_broadcast_async_on(int process_set_id, const char* name,
                                               const void* input, void* output,
                                               kolo_dtype_t dtype, int ndim,
                                               const int64_t* shape, int root_rank,
                                               kolo_handle_t* handle);
KOLO_API kolo_status_t kolo_reducescatter_async_on(int process_set_id, const char* name,
                                                   const void* input, kolo_dtype_t dtype,
                                                   int ndim, const int64_t* shape,
                                                   kolo_reduce_op_t op, double prescale_factor,
                                                   double postscale_factor,
                                                   kolo_handle_t* handle);
KOLO_API kolo_status_t kolo_alltoall_async_on(int process_set_id, const char* name,
                                              const void* input, kolo_dtype_t dtype, int ndim,
                                              const int64_t* shape, const int64_t* splits,
                                              kolo_handle_t* handle);
/* The operations whose output kolo allocates, for tensors that may be in CUDA device memory:
 * as the functions without the suffix, plus `device` (KOLO_DEVICE_*: where `input` lives; pass
 * the device, not KOLO_DEVICE_DETECT, when a rank's tensor may be empty) and `cuda_stream`
 * (as kolo_allreduce_async_on_stream: kolo's stream waits for an event recorded on it now).
 * For a CUDA input the output is allocated on the same device (kolo_handle_output_device says
 * so) and written through NCCL: allgather by ncclAllGather or grouped ncclBroadcast, alltoall
 * by grouped ncclSend/ncclRecv, reducescatter by ncclReduceScatter (unequal shares padded).
 * The handle completes once the output is written (kolo waited for its stream), so it may be
 * used on any stream. Extra errors: KOLO_ERR_INVALID_ARGUMENT for a device below
 * KOLO_DEVICE_DETECT, a reducescatter of int16/uint16/bool or an integer Average of CUDA
 * tensors; KOLO_ERR_UNIMPLEMENTED for a CUDA tensor in a build without CUDA and NCCL; a device
 * this process lacks fails the handle (KOLO_ERR_FAILED_PRECONDITION, naming the device). */
KOLO_API kolo_status_t kolo_allgather_async_on_stream(int process_set_id, const char* name,
                                                      const void* input, kolo_dtype_t dtype,
                                                      int ndim, const int64_t* shape, int device,
                                                      void* cuda_stream, kolo_handle_t* handle);
KOLO_API kolo_status_t kolo_reducescatter_async_on_stream(
    int process_set_id, const char* name, const void* input, kolo_dtype_t dtype, int ndim,
    const int64_t* shape, kolo_reduce_op_t op, double prescale_factor, double postscale_factor,
    int device, void* cuda_stream, kolo_handle_t* handle);
KOLO_API kolo_status_t kolo_alltoall_async_on_stream(int process_set_id, const char* name,
                                                     const void* input, kolo_dtype_t dtype,
                                                     int ndim, const int64_t* shape,
                                                     const int64_t* splits, int device,
                                                     void* cuda_stream, kolo_handle_t* handle);
KOLO_API kolo_status_t kolo_barrier_on(int process_set_id);

/* For bindings that check their framework's tensors before submitting: announces that this rank
 * will not submit `op` ("allreduce", "allgather", "broadcast", "reducescatter" or "alltoall")
 * named `name` on the set, because of `reason`. The other ranks' submissions of that name fail
 * with KOLO_ERR_INVALID_ARGUMENT "<op> '<name>': rank r refused it: <reason>" instead of
 * waiting for this rank. For a refused member of a group, announce every member.
 * Errors: KOLO_ERR_INVALID_ARGUMENT (unknown op, empty or reserved name, unknown set or not a
 * member), KOLO_ERR_FAILED_PRECONDITION (not initialised). */
KOLO_API kolo_status_t kolo_refuse_on(int process_set_id, const char* op, const char* name,
                                      const char* reason);

#endif /* KOLO_KOLO_PROCESS_SETS_H_ */
