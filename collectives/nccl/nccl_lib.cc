#include "collectives/nccl/nccl_lib.h"

#include <dlfcn.h>

#include <atomic>
#include <mutex>

namespace kolo {

namespace {

struct Loaded {
  NcclApi api;
  Status status;
};

template <typename F>
bool Resolve(void* lib, const char* name, F* fn, std::string* missing) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  if (*fn == nullptr) *missing += (missing->empty() ? "" : ", ") + std::string(name);
  return *fn != nullptr;
}

Loaded Load() {
  Loaded l;
  void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) lib = dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    l.status = UnavailableError(std::string("cannot load NCCL (libnccl.so.2): ") +
                                (why ? why : "not found"));
    return l;
  }
  NcclApi& a = l.api;
  std::string missing;
  ncclResult_t (*get_version)(int*) = nullptr;
  Resolve(lib, "ncclGetVersion", &get_version, &missing);
  Resolve(lib, "ncclGetUniqueId", &a.GetUniqueId, &missing);
  Resolve(lib, "ncclCommInitRankConfig", &a.CommInitRankConfig, &missing);
  Resolve(lib, "ncclCommAbort", &a.CommAbort, &missing);
  Resolve(lib, "ncclCommDestroy", &a.CommDestroy, &missing);
  Resolve(lib, "ncclCommGetAsyncError", &a.CommGetAsyncError, &missing);
  Resolve(lib, "ncclAllReduce", &a.AllReduce, &missing);
  Resolve(lib, "ncclReduceScatter", &a.ReduceScatter, &missing);
  Resolve(lib, "ncclAllGather", &a.AllGather, &missing);
  Resolve(lib, "ncclBroadcast", &a.Broadcast, &missing);
  Resolve(lib, "ncclSend", &a.Send, &missing);
  Resolve(lib, "ncclRecv", &a.Recv, &missing);
  Resolve(lib, "ncclRedOpCreatePreMulSum", &a.RedOpCreatePreMulSum, &missing);
  Resolve(lib, "ncclRedOpDestroy", &a.RedOpDestroy, &missing);
  Resolve(lib, "ncclGroupStart", &a.GroupStart, &missing);
  Resolve(lib, "ncclGroupEnd", &a.GroupEnd, &missing);
  Resolve(lib, "ncclGetErrorString", &a.GetErrorString, &missing);
  if (!missing.empty()) {
    l.status = UnavailableError("NCCL (libnccl.so.2) lacks " + missing);
    return l;
  }
  if (get_version(&a.version) != ncclSuccess) a.version = 0;
  // The library stays loaded for the life of the process: communicators may outlive callers.
  return l;
}

std::atomic<const NcclApi*> g_fake{nullptr};

const Loaded& Library() {
  static const Loaded loaded = Load();
  return loaded;
}

std::string VersionOf(int code) {
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
  return "NCCL " + std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
         std::to_string(code % 100);
}

}  // namespace

StatusOr<const NcclApi*> Nccl() {
  if (const NcclApi* fake = g_fake.load(std::memory_order_acquire)) return fake;
  const Loaded& l = Library();
  if (!l.status.ok()) return l.status;
  return &l.api;
}

void SetNcclForTesting(const NcclApi* api) { g_fake.store(api, std::memory_order_release); }

std::string NcclVersionString() {
  auto api = Nccl();
  return VersionOf(api.ok() ? (*api)->version : NCCL_VERSION_CODE);
}

Status NcclError(ncclResult_t r, const char* call) {
  auto api = Nccl();
  const std::string what = api.ok() ? (*api)->GetErrorString(r) : "error " + std::to_string(r);
  const std::string msg = std::string(call) + " failed: " + NcclVersionString() + ": " + what;
  if (r == ncclRemoteError || r == ncclSystemError) return UnavailableError(msg);
  return InternalError(msg);
}

bool NcclDataType(DataType dtype, ncclDataType_t* out) {
  switch (dtype) {
    case DataType::kUInt8: *out = ncclUint8; return true;
    case DataType::kInt8: *out = ncclInt8; return true;
    case DataType::kInt32: *out = ncclInt32; return true;
    case DataType::kInt64: *out = ncclInt64; return true;
    case DataType::kFloat16: *out = ncclFloat16; return true;
    case DataType::kBFloat16: *out = ncclBfloat16; return true;
    case DataType::kFloat32: *out = ncclFloat32; return true;
    case DataType::kFloat64: *out = ncclFloat64; return true;
    default: return false;
  }
}

bool NcclRedOp(ReduceOp op, ncclRedOp_t* out) {
  switch (op) {
    case ReduceOp::kSum: *out = ncclSum; return true;
    case ReduceOp::kMin: *out = ncclMin; return true;
    case ReduceOp::kMax: *out = ncclMax; return true;
    case ReduceOp::kProduct: *out = ncclProd; return true;
    default: return false;
  }
}

}  // namespace kolo
