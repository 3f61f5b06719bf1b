#include "collectives/nccl/nccl_comm.h"

#include <atomic>
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

// A communicator's enqueue lock, held by an NcclLease (an enqueue in progress) and by Abort, so
// an abort from another thread waits for an enqueue on that communicator instead of freeing it
// under the call. Per communicator, not one for the process: NCCL connects its links at a
// communicator's first collective and waits until the peers do the same, so with one lock two
// ranks of one process (threads, or process sets) would wait for each other's lock forever.
// `abort_requested` is raised before Abort takes the lock, so a lease polling a call that is
// still in progress gives the lock up instead of keeping the abort waiting. Shared, so that
// forgetting the entry never frees a lock someone holds. Taken before g_mu.
struct NcclGuard {
  std::mutex enqueue;
  std::atomic<bool> abort_requested{false};
};

namespace {

using Clock = std::chrono::steady_clock;

// A communicator and the number it was made under: generations count up from 1 and are never
// reused, so an NcclWatch can tell its communicator from another. An aborted communicator stays
// as a tombstone (nc == nullptr, its generation kept) until its kolo Communicator goes
// (ForgetNcclComms): a watch then still sees that its communicator is gone, and NcclCommFor
// refuses to make another on one rank alone (nccl_comm.h).
struct Entry {
  ncclComm_t nc = nullptr;
  uint64_t generation = 0;
  std::shared_ptr<NcclGuard> guard = std::make_shared<NcclGuard>();
};

// Keyed by the kolo Communicator's serial (never reused, unlike its address) and the device.
using Key = std::pair<uint64_t, int>;

std::mutex g_mu;  // the tables below
uint64_t g_last_generation = 0;  // guarded by g_mu
std::atomic<double> g_setup_timeout_seconds{30.0};
// Streams by (Communicator::order_serial, device).
std::map<Key, cudaStream_t>& Streams() {
  static auto* s = new std::map<Key, cudaStream_t>();
  return *s;
}
std::map<Key, Entry>& Comms() {
  static auto* c = new std::map<Key, Entry>();
  return *c;
}

std::string Where(const Communicator& comm, int device) {
  return "the NCCL communicator of " + std::to_string(comm.Size()) +
         " ranks on cuda:" + std::to_string(device) + " (this is rank " +
         std::to_string(comm.Rank()) + ")";
}

// Aborts `nc`, on its device: NCCL switches to it and back, and switching back to the default
// device on a thread without a context would make one on GPU 0. Abort, not destroy, at shutdown
// too: ncclCommDestroy flushes outstanding network work, which waits for peers, and shutting
// down must end even when a peer is gone.
void AbortComm(ncclComm_t nc, int device) {
  CudaDeviceScope scope(device);
  if (auto api = Nccl(); api.ok()) (*api)->CommAbort(nc);
}

// With `key`'s enqueue lock held: aborts its communicator (any, or only that of `generation`
// > 0) and leaves the tombstone.
void AbortHeld(const Key& key, uint64_t generation) {
  ncclComm_t nc = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = Comms().find(key);
    if (it == Comms().end() || it->second.nc == nullptr) return;
    if (generation != 0 && it->second.generation != generation) return;
    nc = it->second.nc;
    it->second.nc = nullptr;
  }
  AbortComm(nc, key.second);
}

// Aborts `key`'s communicator (any, or only that of `generation` > 0), leaving its tombstone.
void Abort(const Key& key, uint64_t generation = 0) {
  std::shared_ptr<NcclGuard> guard;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = Comms().find(key);
    if (it == Comms().end() || it->second.nc == nullptr) return;
    if (generation != 0 && it->second.generation != generation) return;
    guard = it->second.guard;
  }
  guard->abort_requested.store(true, std::memory_order_release);
  std::lock_guard<std::mutex> no_enqueue(guard->enqueue);
  AbortHeld(key, generation);
}

// Polls `nc` while NCCL is still doing `what` (ncclInProgress), within the set-up timeout and
// while `comm`'s peers live; `abort_requested`, when given, ends the wait early. OK once NCCL
// has finished; else NCCL's error, the timeout, or the peer that is gone.
Status PollInProgress(const NcclApi* api, ncclComm_t nc, Communicator& comm, int device,
                      const char* what, const std::atomic<bool>* abort_requested) {
  const double timeout = g_setup_timeout_seconds.load(std::memory_order_relaxed);
  const Clock::time_point start = Clock::now();
  Clock::time_point next_liveness = start + std::chrono::seconds(1);
  int spins = 0;
  for (;;) {
    ncclResult_t state = ncclInProgress;
    const ncclResult_t q = api->CommGetAsyncError(nc, &state);
    if (q != ncclSuccess) return NcclError(q, "ncclCommGetAsyncError").AddContext(what);
    if (state == ncclSuccess) return Status::OK();
    if (state != ncclInProgress) return NcclError(state, what).AddContext(Where(comm, device));
    if (abort_requested != nullptr && abort_requested->load(std::memory_order_acquire)) {
      return UnavailableError(std::string(what) + ": " + Where(comm, device) +
                              " was aborted after a failure elsewhere while NCCL was connecting");
    }
    const Clock::time_point now = Clock::now();
    const double waited = std::chrono::duration<double>(now - start).count();
    if (timeout > 0 && waited >= timeout) {
      return DeadlineExceededError(
          std::string(what) + ": " + Where(comm, device) + " was still being set up after " +
          std::to_string(static_cast<int>(waited)) +
          " s (KOLO_START_TIMEOUT): NCCL waits for every rank to reach it, so a rank is stuck or "
          "gone before it, or NCCL cannot connect the ranks (NCCL_DEBUG=INFO says why)");
    }
    if (now >= next_liveness) {
      Status alive = comm.CheckLiveness();
      if (!alive.ok()) return alive.AddContext(std::string(what) + " on " + Where(comm, device));
      next_liveness = now + std::chrono::seconds(1);
    }
    if (++spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

}  // namespace

void SetNcclSetupTimeout(double seconds) {
  g_setup_timeout_seconds.store(seconds, std::memory_order_relaxed);
}

StatusOr<cudaStream_t> KoloStream(const Communicator& comm, int device) {
  const Key key(comm.order_serial(), device);
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = Streams().find(key);
  if (it != Streams().end()) return it->second;
  cudaStream_t s = nullptr;
  cudaError_t e;
  {
    CudaDeviceScope scope(device);
    e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  }
  if (e != cudaSuccess) return CudaError(e, "cudaStreamCreateWithFlags");
  Streams().emplace(key, s);
  return s;
}

void ReleaseKoloStreams(const Communicator& comm) {
  std::vector<std::pair<int, cudaStream_t>> gone;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    for (auto it = Streams().begin(); it != Streams().end();) {
      if (it->first.first == comm.order_serial()) {
        gone.emplace_back(it->first.second, it->second);
        it = Streams().erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& [device, stream] : gone) {
    CudaDeviceScope scope(device);
    cudaStreamDestroy(stream);
  }
}

StatusOr<ncclComm_t> NcclCommFor(Communicator& comm, int device) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = Comms().find({comm.serial(), device});
    if (it != Comms().end()) {
      if (it->second.nc != nullptr) return it->second.nc;
      return UnavailableError(
          Where(comm, device) +
          " was aborted after an earlier failure (see that error). kolo does not make another "
          "on its own: the other ranks may still hold theirs and would never join it. Device "
          "collectives of these ranks fail from now on; shut kolo down and start again, or use a "
          "new process set");
    }
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
    // Every rank learns this from the broadcast alike, so none holds a communicator: a later
    // operation may try again on all of them.
    if (comm.Rank() == 0) return NcclError(made, "ncclGetUniqueId");
    return UnavailableError("rank 0 could not make an ncclUniqueId (see its error)");
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // returns at once; polled below, so a rank that never comes is noticed
  ncclComm_t nc = nullptr;
  ncclResult_t r;
  {
    CudaDeviceScope scope(device);
    r = api->CommInitRankConfig(&nc, comm.Size(), boot.id, comm.Rank(), &config);
  }
  Status made_status;
  if (r == ncclSuccess || r == ncclInProgress) {
    made_status = PollInProgress(api, nc, comm, device, "ncclCommInitRankConfig", nullptr);
  } else {
    made_status = NcclError(r, "ncclCommInitRankConfig");
  }
  if (!made_status.ok()) {
    if (nc != nullptr) AbortComm(nc, device);
    // A tombstone, as after any abort: the peers whose set-up finished hold theirs, so this
    // rank must not start another set-up on its own.
    std::lock_guard<std::mutex> lock(g_mu);
    Entry& entry = Comms()[Key(comm.serial(), device)];
    entry.nc = nullptr;
    entry.generation = ++g_last_generation;
    return made_status.AddContext("making " + Where(comm, device));
  }
  std::lock_guard<std::mutex> lock(g_mu);
  Entry& entry = Comms()[Key(comm.serial(), device)];
  entry.nc = nc;
  entry.generation = ++g_last_generation;
  return nc;
}

NcclLease::NcclLease(Communicator* comm, int device, uint64_t generation,
                     std::shared_ptr<NcclGuard> guard, ncclComm_t nc)
    : comm_(comm),
      device_(device),
      generation_(generation),
      guard_(std::move(guard)),
      lock_(guard_->enqueue),
      nc_(nc) {}

NcclLease::~NcclLease() = default;

Status NcclLease::Settle(ncclResult_t r, const char* call) {
  if (r == ncclSuccess) return Status::OK();
  KOLO_ASSIGN_OR_RETURN(const NcclApi* api, Nccl());
  Status outcome = r == ncclInProgress
                       ? PollInProgress(api, nc_, *comm_, device_, call, &guard_->abort_requested)
                       : NcclError(r, call).AddContext(Where(*comm_, device_));
  if (outcome.ok()) return outcome;
  // Aborted here, under this lease's lock, unless another thread asked first (it aborts once
  // the lease is gone).
  if (!guard_->abort_requested.load(std::memory_order_acquire)) {
    AbortHeld({comm_->serial(), device_}, generation_);
  }
  return outcome;
}

StatusOr<NcclLease> LeaseNcclComm(Communicator& comm, int device) {
  KOLO_ASSIGN_OR_RETURN(ncclComm_t nc, NcclCommFor(comm, device));
  std::shared_ptr<NcclGuard> guard;
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = Comms().find({comm.serial(), device});
    if (it != Comms().end()) {
      guard = it->second.guard;
      generation = it->second.generation;
    }
  }
  if (!guard) return UnavailableError(Where(comm, device) + " was released");
  NcclLease lease(&comm, device, generation, std::move(guard), nc);
  {
    // An abort between NcclCommFor and the lock leaves a tombstone (nc == nullptr), and nothing
    // makes another for this Communicator, so comparing pointers is enough here.
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = Comms().find({comm.serial(), device});
    if (it == Comms().end() || it->second.nc != nc) {
      return UnavailableError(Where(comm, device) +
                              " was aborted after a failure (see the earlier error)");
    }
  }
  return lease;
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
