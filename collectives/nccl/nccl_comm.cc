#include "collectives/nccl/nccl_comm.h"

#include <chrono>
#include <cstdint>
#include <string>
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

// A communicator and the number it was made under: generations count up from 1 and are never
// reused, so an NcclWatch can tell its communicator from a fresh one made after an abort. An
// aborted communicator stays as a tombstone (nc == nullptr, its generation kept) until the next
// NcclCommFor makes a fresh one: a watch taken just after an enqueue that an abort beat then
// still sees that its communicator is gone.
struct Entry {
  ncclComm_t nc = nullptr;
  uint64_t generation = 0;
};

std::mutex g_mu;  // the tables below
uint64_t g_last_generation = 0;  // guarded by g_mu
// Held by an NcclLease (an enqueue in progress) and by Abort, so an abort from another thread
// waits for the enqueue instead of freeing the communicator under it. Taken before g_mu.
std::mutex g_enqueue_mu;
std::map<int, cudaStream_t>& Streams() {
  static auto* s = new std::map<int, cudaStream_t>();
  return *s;
}
std::map<std::pair<const Communicator*, int>, Entry>& Comms() {
  static auto* c = new std::map<std::pair<const Communicator*, int>, Entry>();
  return *c;
}

// Aborts and forgets (comm, device)'s communicator: any, or only that of `generation` (> 0).
void Abort(const Communicator& comm, int device, uint64_t generation = 0) {
  std::lock_guard<std::mutex> no_enqueue(g_enqueue_mu);
  ncclComm_t nc = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = Comms().find({&comm, device});
    if (it == Comms().end() || it->second.nc == nullptr) return;
    if (generation != 0 && it->second.generation != generation) return;
    nc = it->second.nc;
    it->second.nc = nullptr;
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
    if (it != Comms().end() && it->second.nc != nullptr) return it->second.nc;
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
  Comms()[std::make_pair(&comm, device)] = Entry{nc, ++g_last_generation};
  return nc;
}

StatusOr<NcclLease> LeaseNcclComm(Communicator& comm, int device) {
  KOLO_ASSIGN_OR_RETURN(ncclComm_t nc, NcclCommFor(comm, device));
  std::unique_lock<std::mutex> no_abort(g_enqueue_mu);
  {
    // Only the thread that makes communicators (this one) could make a fresh one at the same
    // address, so comparing pointers is enough here.
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = Comms().find({&comm, device});
    if (it == Comms().end() || it->second.nc != nc) {
      return UnavailableError("the NCCL communicator of these ranks on cuda:" +
                              std::to_string(device) +
                              " was aborted after a failure (see the earlier error)");
    }
  }
  return NcclLease(std::move(no_abort), nc);
}

NcclWatch WatchNccl(Communicator& comm, int device) {
  NcclWatch w;
  w.comm = &comm;
  w.device = device;
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = Comms().find({&comm, device});
  if (it != Comms().end()) w.generation = it->second.generation;
  return w;
}

Status CheckNccl(const NcclWatch& watch) {
  if (watch.generation == 0) return Status::OK();
  KOLO_ASSIGN_OR_RETURN(const NcclApi* api, Nccl());
  ncclResult_t async = ncclSuccess;
  {
    // Under g_mu the communicator cannot be freed: Abort forgets it under g_mu before freeing.
    // ncclCommGetAsyncError is the call NCCL means to be polled from a watching thread while
    // another enqueues (PyTorch's watchdog does the same).
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = Comms().find({watch.comm, watch.device});
    if (it == Comms().end() || it->second.nc == nullptr ||
        it->second.generation != watch.generation) {
      return UnavailableError("the NCCL communicator this work ran on (cuda:" +
                              std::to_string(watch.device) +
                              ") was aborted after an earlier failure, so its result is lost");
    }
    if (api->CommGetAsyncError(it->second.nc, &async) != ncclSuccess) return Status::OK();
  }
  if (async == ncclSuccess || async == ncclInProgress) return Status::OK();
  return NcclError(async, "NCCL (asynchronous)");
}

void AbortNccl(const NcclWatch& watch) {
  if (watch.generation != 0) Abort(*watch.comm, watch.device, watch.generation);
}

Status WaitForNccl(Communicator& comm, int device, cudaStream_t stream, const char* what) {
  return WaitForNccl({&comm}, device, stream, what);
}

Status WaitForNccl(std::initializer_list<Communicator*> comms, int device, cudaStream_t stream,
                   const char* what) {
  // By watch, not by pointer: the finaliser may abort one of these communicators meanwhile.
  std::vector<NcclWatch> watches;
  for (Communicator* c : comms) watches.push_back(WatchNccl(*c, device));
  auto abort_all = [&] {
    for (const NcclWatch& w : watches) AbortNccl(w);
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
    for (const NcclWatch& w : watches) {
      Status healthy = CheckNccl(w);
      if (!healthy.ok()) {
        abort_all();
        return healthy.AddContext(what);
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
    for (const auto& [key, entry] : Comms()) {
      if (key.first == &comm) devices.push_back(key.second);
    }
  }
  for (int d : devices) Abort(comm, d);
  // The Communicator goes away and its address may be reused: no tombstones for it.
  std::lock_guard<std::mutex> lock(g_mu);
  for (int d : devices) Comms().erase({&comm, d});
}

}  // namespace kolo
