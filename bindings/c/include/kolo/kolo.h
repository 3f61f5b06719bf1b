/*
 * kolo.h — the public C99 API of kolo, a collective-communication runtime for data-parallel
 * training in the style of Horovod.
 *
 * Model: every process (rank) submits named tensors with the *_async functions from any thread.
 * A background thread per process negotiates with the other ranks which names are ready
 * everywhere (coordinator at rank 0), fuses compatible all-reduces into one buffer and runs the
 * collective. Each submission returns a kolo_handle_t that is polled or waited on.
 *
 * Rules that hold for every function below unless it says otherwise:
 *  - Thread safety: every function may be called from any thread, concurrently, after
 *    kolo_init() returned KOLO_SUCCESS. kolo_init/kolo_shutdown must not race each other.
 *  - Names: a tensor name identifies one operation across ranks; every rank must submit the same
 *    name with matching parameters. A name may be reused once its previous operation completed;
 *    submitting a name that is still in flight on the same rank fails at submission with
 *    KOLO_ERR_INVALID_ARGUMENT and the earlier operation is unaffected.
 *  - Buffers: the caller owns input and output buffers and must keep them valid and unmodified
 *    until the handle completes. `output == input` selects the in-place variant; otherwise the
 *    input is never written. A failed operation leaves the output untouched when the failure is
 *    detected by negotiation (mismatch, shutdown); a transport failure during the collective
 *    itself may leave the output partially written.
 *  - Shapes: `ndim` in [0, KOLO_MAX_DIMS], `shape` gives the extent of each dimension (elements).
 *    A zero-element tensor is valid.
 *  - Errors: functions return kolo_status_t. A mismatch between ranks (dtype, shape, operation,
 *    root, reduce op, scale factors) completes the handle on every rank with
 *    KOLO_ERR_INVALID_ARGUMENT and a message naming the tensor, the ranks and both values, e.g.
 *    "allreduce 'grad/fc1': shape mismatch: rank 0 has [3,4], rank 1 has [4,3]".
 *    A submission that one rank refuses at submission time (bad root, NULL buffer, Average of
 *    bool, ...) fails there at once, and the other ranks' operations of the same name fail with
 *    KOLO_ERR_INVALID_ARGUMENT: "broadcast 'w': rank 1 refused it: root rank 5 is outside
 *    [0, 2)", so no rank waits for it. (Refusals of the name itself, of ndim, dtype or op
 *    values, and of a name still in flight are local only.)
 */
#ifndef KOLO_KOLO_H_
#define KOLO_KOLO_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define KOLO_API __attribute__((visibility("default")))
#else
#define KOLO_API
#endif

#define KOLO_VERSION_MAJOR 0
#define KOLO_VERSION_MINOR 1
#define KOLO_VERSION_PATCH 0

/* Largest number of dimensions of a tensor. */
#define KOLO_MAX_DIMS 16

/* Where a tensor lives, for the *_on_stream functions: KOLO_DEVICE_DETECT asks CUDA from the
 * pointers (what every other function does; an empty tensor's NULL pointer reads as host
 * memory), KOLO_DEVICE_HOST is host memory, n >= 0 is CUDA device n. */
#define KOLO_DEVICE_DETECT (-2)
#define KOLO_DEVICE_HOST (-1)

/* Status codes (Abseil's code set, same numbers). */
typedef enum {
  KOLO_SUCCESS = 0,
  KOLO_ERR_CANCELLED = 1,
  KOLO_ERR_UNKNOWN = 2,
  KOLO_ERR_INVALID_ARGUMENT = 3,   /* the caller's input, or a mismatch between ranks */
  KOLO_ERR_DEADLINE_EXCEEDED = 4,  /* a stall or timeout */
  KOLO_ERR_NOT_FOUND = 5,
  KOLO_ERR_ALREADY_EXISTS = 6,
  KOLO_ERR_PERMISSION_DENIED = 7,
  KOLO_ERR_RESOURCE_EXHAUSTED = 8, /* out of memory */
  KOLO_ERR_FAILED_PRECONDITION = 9,/* not initialised, or shut down */
  KOLO_ERR_ABORTED = 10,
  KOLO_ERR_OUT_OF_RANGE = 11,
  KOLO_ERR_UNIMPLEMENTED = 12,
  KOLO_ERR_INTERNAL = 13,
  KOLO_ERR_UNAVAILABLE = 14,       /* a peer is gone */
  KOLO_ERR_DATA_LOSS = 15,
  KOLO_ERR_UNAUTHENTICATED = 16
} kolo_status_t;

/* Element types; the values are Horovod's DataType numbers. */
typedef enum {
  KOLO_UINT8 = 0,
  KOLO_INT8 = 1,
  KOLO_UINT16 = 2,
  KOLO_INT16 = 3,
  KOLO_INT32 = 4,
  KOLO_INT64 = 5,
  KOLO_FLOAT16 = 6, /* IEEE 754 binary16 */
  KOLO_FLOAT32 = 7,
  KOLO_FLOAT64 = 8,
  KOLO_BOOL = 9,    /* one byte, 0 or 1 */
  KOLO_BFLOAT16 = 10
} kolo_dtype_t;

/* Reduction operations; the values are Horovod's ReduceOp numbers.
 * Sum of bool is logical OR, Product and Min of bool are logical AND, Max of bool is OR.
 * Average = Sum, then division by the number of ranks. For integer dtypes the division
 * truncates toward zero (C's `/`); Average is refused for bool.
 * float16/bfloat16 are reduced in float32 and rounded to the storage type once, at the end.
 * Adasum (Maleki et al., MLSys 2021; Horovod's): a pair of tensors combines as
 * (1 - a.b / 2|a|^2) a + (1 - a.b / 2|b|^2) b (a coefficient is 1 when its squared norm is
 * below sqrt(DBL_MIN)), over the binary tree of ranks: (0,1), (2,3), ..., then those results.
 * Floating dtypes and host tensors only; the number of ranks (of the process set) must be a
 * power of two; each tensor of a fused group has its own dot products; scale factors apply as
 * for Sum. */
typedef enum {
  KOLO_OP_AVERAGE = 0,
  KOLO_OP_SUM = 1,
  KOLO_OP_ADASUM = 2, /* adaptive summation; see above */
  KOLO_OP_MIN = 3,
  KOLO_OP_MAX = 4,
  KOLO_OP_PRODUCT = 5
} kolo_reduce_op_t;

/* One submitted operation. Opaque; free with kolo_handle_free. */
typedef struct kolo_handle_s* kolo_handle_t;

/* ---- life cycle ---------------------------------------------------------------------------- */

/* Initialises kolo on every rank of MPI_COMM_WORLD. Collective: every rank must call it
 * (kolo_init_ranks and kolo_init_comm below start it on fewer ranks).
 * Initialises MPI with MPI_Init_thread(MPI_THREAD_MULTIPLE) when the application has not;
 * otherwise attaches to the application's MPI, which must provide MPI_THREAD_MULTIPLE if the
 * application itself calls MPI while kolo is initialised (MPI_THREAD_SERIALIZED is accepted,
 * with a warning, for applications that do not). Blocking. Calling it when already initialised
 * is a no-op returning KOLO_SUCCESS. Reads the KOLO_* environment variables (HOROVOD_* twins
 * accepted). It succeeds or fails on every rank together: a rank with a malformed variable
 * fails with it, the others with KOLO_ERR_FAILED_PRECONDITION naming that rank.
 * KOLO_FUSION_CHUNK_BYTES must be equal on every rank. Rank 0 opens the KOLO_TIMELINE file
 * here: a path it cannot write fails kolo_init (on every rank, as above). Under a PMIx
 * launcher (Open MPI's mpirun, srun --mpi=pmix) the ranks first wait for each other at most
 * KOLO_START_TIMEOUT seconds (30): a rank that never calls kolo_init makes the others fail with
 * KOLO_ERR_DEADLINE_EXCEEDED naming it, instead of waiting in MPI_Init for ever.
 * Errors: KOLO_ERR_FAILED_PRECONDITION (MPI finalised, thread level too low, another rank
 * failed), KOLO_ERR_INVALID_ARGUMENT (a malformed or disagreeing KOLO_* variable, an
 * unwritable KOLO_TIMELINE), KOLO_ERR_DEADLINE_EXCEEDED (a rank missing at the start),
 * KOLO_ERR_INTERNAL (MPI failed). */
KOLO_API kolo_status_t kolo_init(void);

/* kolo_init on a subset of MPI_COMM_WORLD (Horovod's horovod_init(ranks, nranks)): the world
 * ranks ranks[0..nranks) in the order given, so kolo_rank() is this rank's position in the list
 * and kolo_size() is nranks; local and cross ranks, process sets (whose ranks are kolo ranks)
 * and every operation stay inside the subset. Collective over the listed ranks only
 * (MPI_Comm_create_group): the other ranks never take part and are never waited for; each
 * listed rank must pass the same list. Otherwise as kolo_init.
 * Errors as kolo_init, and KOLO_ERR_INVALID_ARGUMENT, without waiting for any rank, for an
 * empty list, a rank outside MPI_COMM_WORLD or listed twice, and on a rank that is not listed
 * (the message names the list). */
KOLO_API kolo_status_t kolo_init_ranks(const int* ranks, int nranks);

/* How to start kolo, as fields: the start-up API grows by fields at the end of this struct,
 * not by functions (as kolo_op_args_t). Start from KOLO_INIT_CONFIG_INIT, which sets `size`
 * and every default. */
typedef struct {
  size_t size;                  /* sizeof(kolo_init_config_t) */
  const int* ranks;             /* with nranks > 0: start on these MPI_COMM_WORLD ranks, as
                                   kolo_init_ranks; default NULL */
  int nranks;                   /* 0 (the default): every rank of MPI_COMM_WORLD, as kolo_init */
  double start_timeout_seconds; /* how long the ranks wait for each other at the start (see
                                   kolo_init); < 0 (the default): KOLO_START_TIMEOUT; 0: no limit */
} kolo_init_config_t;

#define KOLO_INIT_CONFIG_INIT { sizeof(kolo_init_config_t), NULL, 0, -1.0 }

/* kolo_init or kolo_init_ranks as `config` says; errors as theirs, and
 * KOLO_ERR_INVALID_ARGUMENT for a NULL config, a `size` this library does not know, nranks < 0,
 * ranks NULL with nranks > 0, or a start timeout that is not a number of seconds. */
KOLO_API kolo_status_t kolo_init_with_config(const kolo_init_config_t* config);

/* kolo_init on the application's communicator (Horovod's horovod_init_comm): collective over
 * `comm`, whose ranks are kolo's ranks. kolo duplicates it, so the caller may free `comm` once
 * this returns. MPI must be initialised (it is, if the caller has a communicator). Otherwise as
 * kolo_init. Errors as kolo_init, and KOLO_ERR_INVALID_ARGUMENT for MPI_COMM_NULL or an
 * intercommunicator.
 * Declared only when <mpi.h> was included before this header: a program that holds an MPI_Comm
 * includes it anyway, and every other user of kolo.h (and its ABI) stays free of the MPI
 * headers. The alternative, a Fortran handle (MPI_Fint) in the signature, would spare that
 * condition but make every C caller convert with MPI_Comm_c2f and lose the type check; bindings
 * that hold a Fortran handle (mpi4py's py2f) call kolo_init_comm_fortran. */
#if defined(MPI_VERSION)
KOLO_API kolo_status_t kolo_init_comm(MPI_Comm comm);
#endif

/* kolo_init_comm on the communicator of a Fortran handle (MPI_Comm_c2f's; mpi4py's
 * comm.py2f()), converted with the MPI kolo runs on: for bindings that do not link MPI
 * themselves (kolo's Python module), so that a process started without MPI never loads it.
 * Errors as kolo_init_comm, and KOLO_ERR_FAILED_PRECONDITION when MPI is not running (not yet
 * initialised, or finalised), KOLO_ERR_INVALID_ARGUMENT for a handle that names no
 * communicator. */
KOLO_API kolo_status_t kolo_init_comm_fortran(int fortran_comm);

/* Stops the background thread on every rank. Collective in effect: once one rank shuts down,
 * the others' pending and later operations fail with KOLO_ERR_FAILED_PRECONDITION naming that
 * rank. Operations pending on this rank complete with KOLO_ERR_FAILED_PRECONDITION.
 * Blocking. kolo_init() may be called again afterwards. MPI is not finalised here: if kolo
 * initialised MPI, it is finalised at process exit. Safe to call when not initialised.
 * MPI_Finalize calls it first (an MPI_COMM_SELF attribute), so an application that finalises
 * MPI, or returns from main, without calling it still stops cleanly. */
KOLO_API kolo_status_t kolo_shutdown(void);

/* 1 when kolo_init succeeded and kolo_shutdown has not been called since, else 0. */
KOLO_API int kolo_is_initialized(void);

/* Rank layout; -1 when not initialised. local = ranks on this node
 * (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)), cross = ranks with the same local rank. */
KOLO_API int kolo_rank(void);
KOLO_API int kolo_size(void);
KOLO_API int kolo_local_rank(void);
KOLO_API int kolo_local_size(void);
KOLO_API int kolo_cross_rank(void);
KOLO_API int kolo_cross_size(void);

/* 1 when MPI provides MPI_THREAD_MULTIPLE (the application may call MPI from any thread while
 * kolo runs), 0 otherwise or when MPI is not initialised. */
KOLO_API int kolo_mpi_threads_supported(void);

/* ---- operations ---------------------------------------------------------------------------- */

/* All-reduce `input` (shape[0..ndim), dtype) across all ranks into `output` (same shape and
 * dtype; may equal `input` for in-place). output = postscale * reduce_r(prescale * input_r),
 * Average also divides by the number of ranks. Scale factors apply to floating dtypes in the
 * dtype's precision (float16/bfloat16 in float32); for integer dtypes the scaled value is
 * computed in double and truncated toward zero; for bool they must be 1.
 * Non-blocking: returns after queueing; *handle receives the handle on KOLO_SUCCESS.
 * Errors at submission: KOLO_ERR_INVALID_ARGUMENT (NULL name/handle, bad dtype/op/ndim,
 * name in flight, Adasum of an integer, bool or CUDA tensor), KOLO_ERR_FAILED_PRECONDITION (not
 * initialised, shut down), KOLO_ERR_UNIMPLEMENTED (Adasum over a number of ranks that is not a
 * power of two: refused on every rank, naming the count). */
KOLO_API kolo_status_t kolo_allreduce_async(const char* name, const void* input, void* output,
                                            kolo_dtype_t dtype, int ndim, const int64_t* shape,
                                            kolo_reduce_op_t op, double prescale_factor,
                                            double postscale_factor, kolo_handle_t* handle);

/* All-gather along the first dimension: rank r contributes `input` with shape
 * [d_r, shape[1], ...]; the output has shape [sum_r d_r, shape[1], ...], ranks in order.
 * The first dimension may differ per rank; the others and the dtype must match (ndim >= 1).
 * The output is allocated by kolo, owned by the handle, and read with kolo_handle_output.
 * Non-blocking. Errors as kolo_allreduce_async. */
KOLO_API kolo_status_t kolo_allgather_async(const char* name, const void* input,
                                            kolo_dtype_t dtype, int ndim, const int64_t* shape,
                                            kolo_handle_t* handle);

/* Broadcast `root_rank`'s `input` to every rank's `output` (same shape and dtype on every rank;
 * output may equal input). On the root, output receives a copy of input. Non-blocking.
 * Errors as kolo_allreduce_async, plus KOLO_ERR_INVALID_ARGUMENT for root out of range. */
KOLO_API kolo_status_t kolo_broadcast_async(const char* name, const void* input, void* output,
                                            kolo_dtype_t dtype, int ndim, const int64_t* shape,
                                            int root_rank, kolo_handle_t* handle);

/* Reduce-scatter along the first dimension (Horovod's reducescatter): every rank submits
 * `input` of the same shape [n, shape[1], ...] (ndim >= 1) and dtype; the element-wise
 * reduction of all ranks' inputs is split along the first dimension and rank r receives its
 * share: n / size rows, plus one more on the first n % size ranks (ranks in order; rank r's rows
 * start after those of ranks 0..r-1). A share may be zero rows.
 * `op` must be KOLO_OP_SUM or KOLO_OP_AVERAGE (others fail at submission with
 * KOLO_ERR_INVALID_ARGUMENT); scale factors and Average follow kolo_allreduce_async exactly:
 * output = postscale * reduce_r(prescale * input_r) [/ size for Average, truncating toward
 * zero for integer dtypes]; float16/bfloat16 are reduced in float32 and rounded once, at the end.
 * The output ([share_r, shape[1], ...], same dtype) is allocated by kolo, owned by the handle and
 * read with kolo_handle_output. The input is never written. Non-blocking; thread safety and
 * names as every operation. Errors at submission as kolo_allreduce_async (plus a reduce op
 * other than Sum/Average, Average of bool, ndim 0); a mismatch of dtype, shape, reduce op or
 * scale factors between ranks fails the handle on every rank with KOLO_ERR_INVALID_ARGUMENT. */
KOLO_API kolo_status_t kolo_reducescatter_async(const char* name, const void* input,
                                                kolo_dtype_t dtype, int ndim,
                                                const int64_t* shape, kolo_reduce_op_t op,
                                                double prescale_factor, double postscale_factor,
                                                kolo_handle_t* handle);

/* All-to-all along the first dimension (Horovod's alltoall): rank r submits `input` of shape
 * [n_r, shape[1], ...] (ndim >= 1) and `splits`, kolo_size() entries >= 0 summing to n_r:
 * rows [splits[0] + ... + splits[q-1], +splits[q]) go to rank q. splits == NULL means an equal
 * split (n_r must then be divisible by kolo_size(), else KOLO_ERR_INVALID_ARGUMENT at
 * submission). Rank r receives from every rank q the rows q sent to r, concatenated in rank
 * order: the output has shape [sum_q splits_q[r], shape[1], ...]; it is allocated by kolo, owned
 * by the handle and read with kolo_handle_output, and the rows received from each rank with
 * kolo_handle_received_splits. `splits` is copied before the call returns; the input is never
 * written. The first dimension may differ per rank; dtype and the other dimensions must match
 * (a mismatch fails the handle on every rank with KOLO_ERR_INVALID_ARGUMENT naming the ranks).
 * Non-blocking. Errors at submission as kolo_allreduce_async plus the splits rules above. */
KOLO_API kolo_status_t kolo_alltoall_async(const char* name, const void* input,
                                           kolo_dtype_t dtype, int ndim, const int64_t* shape,
                                           const int64_t* splits, kolo_handle_t* handle);

/* Blocks until every rank has called kolo_barrier (or kolo_join, see there). It is negotiated like a named operation (a
 * reserved internal name; names starting with "__kolo_barrier." are refused for other
 * operations), so it is ordered with the operations submitted before it on every rank; it does
 * not wait for their completion. Call it from one thread per rank at a time: the n-th barrier of
 * a rank matches the n-th of every other rank.
 * Errors: KOLO_ERR_FAILED_PRECONDITION (not initialised, shut down, or a peer shut down),
 * KOLO_ERR_UNAVAILABLE / KOLO_ERR_INTERNAL as other operations; the message is in
 * kolo_last_error(). */
KOLO_API kolo_status_t kolo_barrier(void);

/* Horovod's join: the calling rank has run out of data. Blocks until every rank has called
 * kolo_join and stores the rank that joined last in *last_joined_rank (the same value on every
 * rank; may be NULL). Until then, the other ranks' kolo_allreduce_async calls proceed: each
 * joined rank contributes the identity of the reduction (0 for Sum and Average; Average still
 * divides by kolo_size(); the dtype's largest value or +inf for Min, its lowest value or -inf
 * for Max, 1 for Product; bool: false for Sum and Max, true for Min and Product), and their
 * kolo_barrier calls complete with the joined ranks taking part. For an all-reduce of CUDA
 * tensors the joined rank's identity is made on its own device: the device of its last CUDA
 * submission to the process set, or, if it made none, the submitters' device ordinal. An allgather, broadcast,
 * reducescatter or alltoall that a joined rank has not submitted fails on
 * the ranks that submitted it with KOLO_ERR_INVALID_ARGUMENT ("... rank(s) r joined and cannot
 * take part in <op>"). Operations the calling rank submitted before joining complete normally.
 * While the join is pending, other submissions on the calling rank (from other threads) fail
 * with KOLO_ERR_FAILED_PRECONDITION and the same names fail on the other ranks. Once it
 * returns, the runtime is back to normal; kolo_join can be called again. Like kolo_barrier it
 * is negotiated under a reserved name ("__kolo_join." prefix) and must be called from one
 * thread per rank.
 * Errors: KOLO_ERR_FAILED_PRECONDITION (not initialised, shut down, a peer shut down, or this
 * rank's join already pending), KOLO_ERR_UNAVAILABLE / KOLO_ERR_INTERNAL as other operations;
 * the message is in kolo_last_error(). */
KOLO_API kolo_status_t kolo_join(int* last_joined_rank);
/* kolo_join with Horovod's join(device): `device` >= 0 is the CUDA device on which this rank
 * makes its identity for the CUDA all-reduces of its peers while it is joined (instead of the
 * rule above); KOLO_DEVICE_HOST keeps the rule. Errors as kolo_join, plus
 * KOLO_ERR_INVALID_ARGUMENT for a device below KOLO_DEVICE_HOST. */
KOLO_API kolo_status_t kolo_join_on_device(int device, int* last_joined_rank);

/* ---- process sets (Horovod's): kolo/kolo_process_sets.h ------------------------------------- */
#include "kolo/kolo_process_sets.h"

/* ---- operations described by fields --------------------------------------------------------- */

/* The collectives kolo_submit runs; the values are kolo's wire codes. */
typedef enum {
  KOLO_COLLECTIVE_ALLREDUCE = 0,
  KOLO_COLLECTIVE_ALLGATHER = 1,
  KOLO_COLLECTIVE_BROADCAST = 2,
  KOLO_COLLECTIVE_REDUCESCATTER = 3,
  KOLO_COLLECTIVE_ALLTOALL = 4
} kolo_collective_t;

/* One operation, as the fields of the single-tensor functions above. The API grows by fields
 * at the end of this struct, not by functions: `size` is sizeof(kolo_op_args_t) as the caller
 * was compiled, and a field beyond it keeps its default. Start from KOLO_OP_ARGS_INIT, which
 * sets `size` and every default, then set what the operation needs:
 *
 *   kolo_op_args_t args = KOLO_OP_ARGS_INIT;
 *   args.collective = KOLO_COLLECTIVE_ALLREDUCE;
 *   args.name = "grad/fc1"; args.input = x; args.output = x;
 *   args.dtype = KOLO_FLOAT32; args.ndim = 1; args.shape = &n;
 *   kolo_submit(&args, &handle);
 *
 * A field the collective does not read must keep its default (root_rank for an all-reduce,
 * splits for anything but an all-to-all, ...): a set one fails with KOLO_ERR_INVALID_ARGUMENT,
 * so a mistaken field is not silently ignored. */
typedef struct {
  size_t size;                  /* sizeof(kolo_op_args_t) */
  kolo_collective_t collective; /* default KOLO_COLLECTIVE_ALLREDUCE */
  const char* name;
  const void* input;
  void* output;                 /* all-reduce and broadcast; NULL for the others (kolo
                                   allocates their output) */
  kolo_dtype_t dtype;           /* default KOLO_FLOAT32 */
  int ndim;
  const int64_t* shape;
  kolo_reduce_op_t reduce_op;   /* all-reduce, reduce-scatter; default KOLO_OP_SUM */
  double prescale_factor;       /* all-reduce, reduce-scatter; default 1 */
  double postscale_factor;      /* all-reduce, reduce-scatter; default 1 */
  int root_rank;                /* broadcast; default 0 */
  const int64_t* splits;        /* all-to-all; default NULL (an equal split) */
  int process_set_id;           /* default 0: every rank */
  int device;                   /* KOLO_DEVICE_*; default KOLO_DEVICE_DETECT */
  void* cuda_stream;            /* the stream whose queued work writes `input`; default NULL:
                                   CUDA's legacy default stream */
} kolo_op_args_t;

#define KOLO_OP_ARGS_INIT                                                                   \
  {                                                                                         \
    sizeof(kolo_op_args_t), KOLO_COLLECTIVE_ALLREDUCE, NULL, NULL, NULL, KOLO_FLOAT32, 0,   \
        NULL, KOLO_OP_SUM, 1.0, 1.0, 0, NULL, 0, KOLO_DEVICE_DETECT, NULL                   \
  }

/* Submits the operation `args` describes: the same operation, checks and errors as its
 * single-tensor function (kolo_allreduce_async_on_stream, ...). Also KOLO_ERR_INVALID_ARGUMENT
 * for a NULL args, a `size` smaller than the struct's first version or larger than this
 * library's, an unknown collective, or a field set that the collective does not read. */
KOLO_API kolo_status_t kolo_submit(const kolo_op_args_t* args, kolo_handle_t* handle);

/* Submits args[0..count) as one group (see "grouped operations" below): every member must have
 * the same collective (all-reduce, all-gather or reduce-scatter), process set, reduce op, scale
 * factors and cuda_stream; else KOLO_ERR_INVALID_ARGUMENT naming the first member that differs.
 * handles[i] receives member i's handle. */
KOLO_API kolo_status_t kolo_submit_group(const kolo_op_args_t* args, int count,
                                         kolo_handle_t* handles);

/* ---- grouped operations -------------------------------------------------------------------- */

/* `count` tensors submitted as one group on process set `process_set_id` (0 = every rank): each
 * tensor i is described as in the single-tensor function (names[i], inputs[i], outputs[i],
 * dtypes[i], ndims[i], shapes[i]); op and scale factors apply to all. The group is negotiated and
 * executed all-or-nothing (Horovod's grouped_allreduce): its tensors are queued together or not
 * at all, run in the same cycle (fused where they can be), and when one of them fails on any
 * rank — a mismatch, a refused submission — every one fails on every rank ("... grouped with
 * 'x', which failed: <why>"). Every rank must group the same names. On success handles[i] is the
 * handle of tensor i; on failure no handle is created.
 * Errors: those of the single-tensor functions, for the first bad tensor (its message names it);
 * KOLO_ERR_INVALID_ARGUMENT also for count < 1 or NULL arrays. */
KOLO_API kolo_status_t kolo_grouped_allreduce_async_on(
    int process_set_id, int count, const char* const* names, const void* const* inputs,
    void* const* outputs, const kolo_dtype_t* dtypes, const int* ndims,
    const int64_t* const* shapes, kolo_reduce_op_t op, double prescale_factor,
    double postscale_factor, kolo_handle_t* handles);
KOLO_API kolo_status_t kolo_grouped_allgather_async_on(int process_set_id, int count,
                                                       const char* const* names,
                                                       const void* const* inputs,
                                                       const kolo_dtype_t* dtypes,
                                                       const int* ndims,
                                                       const int64_t* const* shapes,
                                                       kolo_handle_t* handles);
KOLO_API kolo_status_t kolo_grouped_reducescatter_async_on(
    int process_set_id, int count, const char* const* names, const void* const* inputs,
    const kolo_dtype_t* dtypes, const int* ndims, const int64_t* const* shapes,
    kolo_reduce_op_t op, double prescale_factor, double postscale_factor, kolo_handle_t* handles);
/* The grouped operations for tensors that may be in CUDA memory: `devices` is NULL (kolo asks
 * CUDA) or devices[i] is tensor i's KOLO_DEVICE_*; `cuda_stream` (NULL: CUDA's legacy
 * default stream) is the stream whose queued work writes the inputs, as in kolo_allreduce_async_on_stream. */
KOLO_API kolo_status_t kolo_grouped_allreduce_async_on_stream(
    int process_set_id, int count, const char* const* names, const void* const* inputs,
    void* const* outputs, const kolo_dtype_t* dtypes, const int* ndims,
    const int64_t* const* shapes, kolo_reduce_op_t op, double prescale_factor,
    double postscale_factor, const int* devices, void* cuda_stream, kolo_handle_t* handles);
KOLO_API kolo_status_t kolo_grouped_allgather_async_on_stream(
    int process_set_id, int count, const char* const* names, const void* const* inputs,
    const kolo_dtype_t* dtypes, const int* ndims, const int64_t* const* shapes,
    const int* devices, void* cuda_stream, kolo_handle_t* handles);
KOLO_API kolo_status_t kolo_grouped_reducescatter_async_on_stream(
    int process_set_id, int count, const char* const* names, const void* const* inputs,
    const kolo_dtype_t* dtypes, const int* ndims, const int64_t* const* shapes,
    kolo_reduce_op_t op, double prescale_factor, double postscale_factor, const int* devices,
    void* cuda_stream, kolo_handle_t* handles);

/* Counters of the negotiation since kolo_init, for benchmarks and for checking that the response
 * cache works (KOLO_CACHE_CAPACITY): a training loop that repeats the same tensor names should
 * show cache_hits growing and slow_cycles staying flat. */
typedef struct {
  uint64_t cycles;              /* negotiation cycles of the background thread */
  uint64_t slow_cycles;         /* cycles that gathered requests at the coordinator (rank 0) */
  uint64_t cache_hits;          /* submissions agreed through the response cache */
  uint64_t cache_misses;        /* cacheable submissions that were not cached */
  uint64_t cache_invalidations; /* cache entries dropped because a tensor's parameters changed,
                                   or because its peers kept it waiting (stall inspector) */
  uint64_t negotiate_ns;        /* time the background thread spent negotiating, ns */
  uint64_t exchange_ns;         /* of which in the negotiation's collectives (including the wait
                                   for the slowest rank), ns */
  int64_t fusion_threshold;     /* bytes, in force now (KOLO_AUTOTUNE changes it) */
  double cycle_time_ms;         /* in force now */
  int autotune_done;            /* rank 0: 1 once KOLO_AUTOTUNE has settled (or is off) */
} kolo_negotiation_stats_t;

/* Fills *stats (this rank's counters). Errors: KOLO_ERR_INVALID_ARGUMENT (NULL),
 * KOLO_ERR_FAILED_PRECONDITION (not initialised). */
KOLO_API kolo_status_t kolo_negotiation_stats(kolo_negotiation_stats_t* stats);

/* Counters of fusion since kolo_init: whether the negotiation put several tensors into one
 * operation. Grows by fields at its end: start from KOLO_FUSION_STATS_INIT, which sets `size`;
 * the library fills the fields that fit in it. */
typedef struct {
  size_t size;               /* sizeof(kolo_fusion_stats_t) */
  uint64_t fused_operations; /* operations that carried more than one tensor */
  uint64_t fused_tensors;    /* the tensors those carried */
} kolo_fusion_stats_t;

#define KOLO_FUSION_STATS_INIT { sizeof(kolo_fusion_stats_t), 0, 0 }

/* Fills *stats (this rank's counters). Errors: KOLO_ERR_INVALID_ARGUMENT (NULL, or a `size`
 * smaller than the first version's), KOLO_ERR_FAILED_PRECONDITION (not initialised). */
KOLO_API kolo_status_t kolo_fusion_stats(kolo_fusion_stats_t* stats);
/* ---- timeline ------------------------------------------------------------------------------ */

/* Starts writing the timeline — a Chrome trace of every tensor's negotiation and execution, to
 * open in Perfetto or chrome://tracing (README.md, "Timeline") — to `path`, as KOLO_TIMELINE
 * does from the start. Only rank 0 writes: on the other ranks this does nothing and returns
 * KOLO_SUCCESS, so every rank may call it (Horovod's start_timeline). Creates or truncates the
 * file; a timeline being written is closed first. mark_cycles != 0 marks the start of every
 * background cycle. Not collective; any thread; non-blocking apart from opening the file.
 * Errors: KOLO_ERR_FAILED_PRECONDITION (not initialised), KOLO_ERR_INVALID_ARGUMENT (path NULL
 * or empty, or the file cannot be opened for writing: kolo_last_error() names the path and the
 * system's reason). */
KOLO_API kolo_status_t kolo_start_timeline(const char* path, int mark_cycles);

/* Stops the timeline: the spans still open end now, the file is flushed and closed, a valid
 * JSON array. A no-op when no timeline is being written and on ranks other than 0.
 * kolo_shutdown stops it too. Not collective; any thread.
 * Errors: KOLO_ERR_FAILED_PRECONDITION (not initialised). */
KOLO_API kolo_status_t kolo_stop_timeline(void);

/* ---- handles ------------------------------------------------------------------------------- */

/* 1 when the operation has completed (successfully or not), 0 otherwise. Non-blocking. */
KOLO_API int kolo_poll(kolo_handle_t handle);

/* Blocks until the operation completes and returns its status. */
KOLO_API kolo_status_t kolo_wait(kolo_handle_t handle);

/* Blocks until the operation completes or `timeout_ms` milliseconds have passed (0: does not
 * block, like kolo_poll), then returns what kolo_poll would: 1 when completed, 0 otherwise.
 * For a binding that must stay responsive while it waits (Python checks for signals between
 * slices of a wait, so Ctrl-C interrupts a blocked collective). Any thread. */
KOLO_API int kolo_wait_for(kolo_handle_t handle, int64_t timeout_ms);

/* Status of a completed handle (KOLO_ERR_UNAVAILABLE... as reported), or KOLO_ERR_UNKNOWN
 * while still pending. Non-blocking. */
KOLO_API kolo_status_t kolo_handle_status(kolo_handle_t handle);

/* The message of a completed, failed handle ("" on success or while pending). The string is
 * owned by the handle and valid until kolo_handle_free. */
KOLO_API const char* kolo_handle_message(kolo_handle_t handle);

/* The output of a completed kolo_allgather_async, kolo_reducescatter_async or
 * kolo_alltoall_async: *data points into memory owned by the handle (valid until
 * kolo_handle_free; not dereferenceable when the output has zero elements), *ndim and
 * shape[0..*ndim) its shape (shape must hold KOLO_MAX_DIMS). Errors:
 * KOLO_ERR_FAILED_PRECONDITION when the handle is pending, failed, or not one of those. */
KOLO_API kolo_status_t kolo_handle_output(kolo_handle_t handle, const void** data, int* ndim,
                                          int64_t* shape);

/* Where the output of kolo_handle_output lives: *device = KOLO_DEVICE_HOST (-1) for host memory,
 * n >= 0 for memory on CUDA device n (the input's device; kolo_handle_free frees it in the order
 * of the stream the operation was submitted on, or of CUDA's legacy stream when none was given:
 * work on other streams that uses it must be ordered before that call). Errors as
 * kolo_handle_output, KOLO_ERR_INVALID_ARGUMENT for NULL arguments. */
KOLO_API kolo_status_t kolo_handle_output_device(kolo_handle_t handle, int* device);

/* The rows a completed kolo_alltoall_async received from each rank: splits[0..kolo_size())
 * (the caller's array of kolo_size() entries). Errors: KOLO_ERR_INVALID_ARGUMENT (NULL
 * arguments), KOLO_ERR_FAILED_PRECONDITION when the handle is pending, failed or not an
 * alltoall. */
KOLO_API kolo_status_t kolo_handle_received_splits(kolo_handle_t handle, int64_t* splits);

/* Releases the handle. May be called before completion: the operation still runs and its
 * buffers must stay valid until it would have completed (use kolo_wait first to know when). */
KOLO_API void kolo_handle_free(kolo_handle_t handle);

/* ---- helpers ------------------------------------------------------------------------------- */

/* A static, human-readable name for a status code ("INVALID_ARGUMENT"). */
KOLO_API const char* kolo_status_string(kolo_status_t status);

/* Size of one element of dtype in bytes, or 0 for an unknown dtype. */
KOLO_API size_t kolo_dtype_size(kolo_dtype_t dtype);

/* Message of the last failed submission or init on the calling thread ("" if none). */
KOLO_API const char* kolo_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* KOLO_KOLO_H_ */
