#include "collectives/nccl/nccl_comm.h"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collectives/cuda/cuda_call.h"
#include "collectives/nccl/nccl_lib.h"

namespace kolo {

namespace {

// A communicator and the number it was made under: generations count up from 1 and are never
// reused, so an NcclWatch can tell its communicator from a fresh one made after an abort. An
// aborted communicator stays as a tombstone (nc == nullptr, its generation kept) until the next
// NcclCommFor makes a fresh one: a watch taken just after an enqueue that an abort beat then
// still sees that its communicator is gone.
//
// Each entry has its own enqueue lock, held by an NcclLease (an enqueue in progress) and by
// Abort, so an abort from another thread waits for an enqueue on that communicator instead of
// freeing it under the call. Per communicator, not one for the process: NCCL connects its links
// at a communicator's first collective and blocks until the peers do the same, so with one lock
// two ranks of one process (threads, or process sets) would wait for each other's lock forever.
// Shared, so that forgetting the entry never frees a lock someone holds. Taken before g_mu.
struct Entry {
  ncclComm_t nc = nullptr;
  uint64_t generation = 0;
  std::shared_ptr<std::mutex> enqueue = std::make_shared<std::mutex>();
};

// Keyed by the kolo Communicator's serial (never reused, unlike its address) and the device.
using Key = std::pair<uint64_t, int>;

std::mutex g_mu;  // the tables below
uint64_t g_last_generation = 0;  // guarded by g_mu
std::map<int, cudaStream_t>& Streams() {
  static auto* s = new std::map<int, cudaStream_t>();
  return *s;
}
std::map<Key, Entry>& Comms() {
  static auto* c = new std::map<Key, Entry>();
  return *c;
}

// Aborts and forgets `key`'s communicator: any, or only that of `generation` (> 0).
void Abort(const Key& key, uint64_t generation = 0) {
  std::shared_ptr<std::mutex> enqueue;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = Comms().find(key);
    if (it == Comms().end() || it->second.nc == nullptr) return;
    enqueue = it->second.enqueue;
  }
  std::lock_guard<std::mutex> no_enqueue(*enqueue);
  ncclComm_t nc = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = Comms().find(key);
    if (it == Comms().end() || it->second.nc == nullptr) return;
    if (generation != 0 && it->second.generation != generation) return;
    nc = it->second.nc;
    it->second.nc = nullptr;
  }
  // On the communicator's device: NCCL switches to it and back, and switching back to the
  // default device on a thread without a context would make one on GPU 0.
  CudaDeviceScope scope(key.second);
  // Abort, not destroy, at shutdown too: ncclCommDestroy flushes outstanding network work,
  // which waits for peers, and shutting down must end even when a peer is gone.
  if (auto api = Nccl(); api.ok()) (*api)->CommAbort(nc);
}

}  // namespace

StatusOr<cudaStream_t> KoloStream(int device) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = Streams().find(device);
  if (it != Streams().end()) return it->second;
  cudaStream_t s = nullptr;
  cudaError_t e;
  {
    CudaDeviceScope scope(device);
    e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  }
  if (e != cudaSuccess) return CudaError(e, "cudaStreamCreateWithFlags");
  Streams().emplace(device, s);
  return s;
}

StatusOr<ncclComm_t> NcclCommFor(Communicator& comm, int device) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = Comms().find({comm.serial(), device});
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
  ncclComm_t nc = nullptr;
  ncclResult_t r;
  {
    CudaDeviceScope scope(device);
    r = api->CommInitRank(&nc, comm.Size(), id, comm.Rank());
  }
  if (r != ncclSuccess) return NcclError(r, "ncclCommInitRank");
  std::lock_guard<std::mutex> lock(g_mu);
  Entry& entry = Comms()[Key(comm.serial(), device)];
  entry.nc = nc;
  entry.generation = ++g_last_generation;
  return nc;
}

StatusOr<NcclLease> LeaseNcclComm(Communicator& comm, int device) {
  KOLO_ASSIGN_OR_RETURN(ncclComm_t nc, NcclCommFor(comm, device));
  std::shared_ptr<std::mutex> enqueue;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = Comms().find({comm.serial(), device});
    if (it != Comms().end()) enqueue = it->second.enqueue;
  }
  if (!enqueue) {
    return UnavailableError(
        "the NCCL communicator of these ranks on cuda:" + std::to_string(device) + " was released");
  }
  std::unique_lock<std::mutex> no_abort(*enqueue);
  {
    // Only the thread that makes communicators (this one) could make a fresh one for this
    // Communicator, so comparing pointers is enough here.
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = Comms().find({comm.serial(), device});
    if (it == Comms().end() || it->second.nc != nc) {
      return UnavailableError("the NCCL communicator of these ranks on cuda:" +
                              std::to_string(device) +
                              " was aborted after a failure (see the earlier error)");
    }
  }
  return NcclLease(std::move(enqueue), std::move(no_abort), nc);
}

NcclWatch WatchNccl(Communicator& comm, int device) {
  NcclWatch w;
  w.comm = comm.serial();
  w.device = device;
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = Comms().find({comm.serial(), device});
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
  if (watch.generation != 0) Abort({watch.comm, watch.device}, watch.generation);
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
  std::vector<Key> keys;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (const auto& [key, entry] : Comms()) {
      if (key.first == comm.serial()) keys.push_back(key);
    }
  }
  for (const Key& key : keys) Abort(key);
  // The Communicator goes away: no tombstones for it.
  std::lock_guard<std::mutex> lock(g_mu);
  for (const Key& key : keys) Comms().erase(key);
}

}  // namespace kolo
