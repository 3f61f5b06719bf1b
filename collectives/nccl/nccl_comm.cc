#include "collectives/nccl/nccl_comm.h"

#include <chrono>
#include <initializer_list>
#include <vector>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "collectives/cuda/cuda_call.h"
#include "collectives/nccl/nccl_lib.h"

namespace kolo {

namespace {

std::mutex g_mu;
std::map<int, cudaStream_t>& Streams() {
  static auto* s = new std::map<int, cudaStream_t>();
  return *s;
}
std::map<std::pair<const Communicator*, int>, ncclComm_t>& Comms() {
  static auto* c = new std::map<std::pair<const Communicator*, int>, ncclComm_t>();
  return *c;
}

void Abort(const Communicator& comm, int device) {
  ncclComm_t nc = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = Comms().find({&comm, device});
    if (it == Comms().end()) return;
    nc = it->second;
    Comms().erase(it);
  }
  if (auto api = Nccl(); api.ok()) (*api)->CommAbort(nc);
}

}  // namespace

StatusOr<cudaStream_t> KoloStream(int device) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = Streams().find(device);
  if (it != Streams().end()) return it->second;
  int previous = 0;
  KOLO_CUDA_CALL(cudaGetDevice(&previous));
  KOLO_CUDA_CALL(cudaSetDevice(device));
  cudaStream_t s = nullptr;
  const cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaSetDevice(previous);
  if (e != cudaSuccess) return CudaError(e, "cudaStreamCreateWithFlags");
  Streams().emplace(device, s);
  return s;
}

StatusOr<ncclComm_t> NcclCommFor(Communicator& comm, int device) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = Comms().find({&comm, device});
    if (it != Comms().end()) return it->second;
  }
  KOLO_ASSIGN_OR_RETURN(const NcclApi* api, Nccl());
  // Rank 0 makes the id and sends it with its outcome, so a failure there fails every rank
  // instead of leaving them in the broadcast.
  struct {
    int ok;
    ncclUniqueId id;
  } boot;
  std::memset(&boot, 0, sizeof(boot));
  ncclResult_t made = ncclSuccess;
  if (comm.Rank() == 0) {
    made = api->GetUniqueId(&boot.id);
    boot.ok = made == ncclSuccess ? 1 : 0;
  }
  KOLO_RETURN_IF_ERROR(
      comm.Broadcast(&boot, sizeof(boot), 0).AddContext("broadcast of the ncclUniqueId"));
  if (!boot.ok) {
    if (comm.Rank() == 0) return NcclError(made, "ncclGetUniqueId");
    return UnavailableError("rank 0 could not make an ncclUniqueId (see its error)");
  }
  const ncclUniqueId& id = boot.id;
  int previous = 0;
  KOLO_CUDA_CALL(cudaGetDevice(&previous));
  KOLO_CUDA_CALL(cudaSetDevice(device));
  ncclComm_t nc = nullptr;
  const ncclResult_t r = api->CommInitRank(&nc, comm.Size(), id, comm.Rank());
  cudaSetDevice(previous);
  if (r != ncclSuccess) return NcclError(r, "ncclCommInitRank");
  std::lock_guard<std::mutex> lock(g_mu);
  Comms().emplace(std::make_pair(&comm, device), nc);
  return nc;
}

Status WaitForNccl(Communicator& comm, int device, cudaStream_t stream, const char* what) {
  return WaitForNccl({&comm}, device, stream, what);
}

Status WaitForNccl(std::initializer_list<Communicator*> comms, int device, cudaStream_t stream,
                   const char* what) {
  KOLO_ASSIGN_OR_RETURN(const NcclApi* api, Nccl());
  std::vector<std::pair<Communicator*, ncclComm_t>> ncs;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (Communicator* c : comms) {
      auto it = Comms().find({c, device});
      if (it != Comms().end()) ncs.emplace_back(c, it->second);
    }
  }
  auto abort_all = [&] {
    for (Communicator* c : comms) Abort(*c, device);
  };
  auto last_check = std::chrono::steady_clock::now();
  int spins = 0;
  for (;;) {
    const cudaError_t q = cudaStreamQuery(stream);
    if (q == cudaSuccess) return Status::OK();
    if (q != cudaErrorNotReady) {
      abort_all();
      return CudaError(q, "cudaStreamQuery").AddContext(what);
    }
    for (const auto& [c, nc] : ncs) {
      ncclResult_t async = ncclSuccess;
      if (api->CommGetAsyncError(nc, &async) == ncclSuccess && async != ncclSuccess &&
          async != ncclInProgress) {
        abort_all();
        return NcclError(async, "NCCL (asynchronous)").AddContext(what);
      }
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - last_check > std::chrono::seconds(1)) {
      last_check = now;
      for (Communicator* c : comms) {
        Status alive = c->CheckLiveness();
        if (!alive.ok()) {
          abort_all();
          return alive.AddContext(what);
        }
      }
    }
    if (++spins > 64) std::this_thread::yield();
  }
}

void ForgetNcclComms(const Communicator& comm) {
  std::vector<int> devices;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (const auto& [key, nc] : Comms()) {
      if (key.first == &comm) devices.push_back(key.second);
    }
  }
  for (int d : devices) Abort(comm, d);
}

}  // namespace kolo
