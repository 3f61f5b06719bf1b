// NCCL, opened at run time: libnccl.so.2 is loaded (dlopen) the first time a device buffer
// needs it, so libkolo.so runs on machines without NCCL and a CPU job never touches it. The
// types come from the nccl.h kolo was built against; the calls through this table.
#ifndef KOLO_COLLECTIVES_NCCL_NCCL_LIB_H_
#define KOLO_COLLECTIVES_NCCL_NCCL_LIB_H_

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "base/dtype.h"
#include "base/status.h"

namespace kolo {

struct NcclApi {
  int version = 0;  // NCCL_VERSION_CODE of the loaded library, e.g. 22809
  ncclResult_t (*GetUniqueId)(ncclUniqueId*) = nullptr;
  ncclResult_t (*CommInitRankConfig)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*) = nullptr;
  ncclResult_t (*CommAbort)(ncclComm_t) = nullptr;
  ncclResult_t (*CommDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t*) = nullptr;
  ncclResult_t (*AllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                            cudaStream_t) = nullptr;
  ncclResult_t (*ReduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
                                ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*AllGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t,
                            cudaStream_t) = nullptr;
  ncclResult_t (*Broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                            cudaStream_t) = nullptr;
  ncclResult_t (*Send)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*Recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*RedOpCreatePreMulSum)(ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t,
                                       ncclComm_t) = nullptr;
  ncclResult_t (*RedOpDestroy)(ncclRedOp_t, ncclComm_t) = nullptr;
  ncclResult_t (*GroupStart)() = nullptr;
  ncclResult_t (*GroupEnd)() = nullptr;
  const char* (*GetErrorString)(ncclResult_t) = nullptr;
};

// The loaded library, or kUnavailable "cannot load NCCL (libnccl.so.2): <dlerror>" (also for a
// library missing a symbol kolo calls). Thread-safe; loads once.
StatusOr<const NcclApi*> Nccl();

// Tests only: makes Nccl() return `api` (nullptr: the real library again), so the code that
// drives NCCL's calls (communicator set-up, waits, aborts) runs against a fake without a GPU.
void SetNcclForTesting(const NcclApi* api);

// "NCCL 2.28.9" of the loaded library (or of nccl.h when none is loaded yet).
std::string NcclVersionString();

// A failed NCCL call as a Status: "<call> failed: NCCL 2.28.9: <NCCL's error string>";
// kUnavailable for remote and system errors (a peer is gone), kInternal otherwise.
Status NcclError(ncclResult_t r, const char* call);

// NCCL's type for a kolo dtype; false for dtypes NCCL has not (int16, uint16, bool).
bool NcclDataType(DataType dtype, ncclDataType_t* out);
// NCCL's reduction for kSum, kMin, kMax, kProduct; false for the others (Average is Sum plus a
// scale, done by the caller).
bool NcclRedOp(ReduceOp op, ncclRedOp_t* out);

}  // namespace kolo

// A call through the table, returning a Status on failure (docs/conventions.md "Errors").
#define KOLO_NCCL_CALL(api, fn, ...)                                            \
  do {                                                                          \
    const ncclResult_t kolo_nccl_r_ = (api)->fn(__VA_ARGS__);                  \
    if (kolo_nccl_r_ != ncclSuccess) return ::kolo::NcclError(kolo_nccl_r_, "nccl" #fn); \
  } while (0)

#endif  // KOLO_COLLECTIVES_NCCL_NCCL_LIB_H_
