#include "runtime/world/start_fence.h"

#include <cstdlib>
#include <string>

#include "base/rank_list.h"
#include "base/seconds_text.h"
#include "kolo/config.h"

#if KOLO_WITH_PMIX
#include <pmix.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#endif

namespace kolo {

#if KOLO_WITH_PMIX
namespace {

// Open MPI's mpirun, srun --mpi=pmix and prterun set these in every process they start; without
// them PMIx_Init would look for a system server or start a singleton, neither of which knows
// the job.
bool StartedByPmixLauncher() {
  return std::getenv("PMIX_NAMESPACE") != nullptr && std::getenv("PMIX_RANK") != nullptr;
}

// Which of `ranks` posted `key`: all lookups at once, one shared one-second limit (the keys of
// ranks that arrived are at their servers already; a missing one is asked of its server, which
// waits for it until the limit).
std::vector<int> Arrived(const pmix_proc_t& me, const std::vector<int>& ranks,
                         const std::string& key) {
  struct Lookup;
  struct Slot {
    Lookup* lookup;
    size_t index;
  };
  struct Lookup {
    std::mutex mu;
    std::condition_variable cv;
    int pending = 0;
    std::vector<char> found;
    std::vector<Slot> slots;
    pmix_info_t limit;  // read by PMIx until the callbacks, so it lives here too
  };
  // On the heap: the callbacks point into it, and if the server has not answered every lookup
  // when the wait below gives up, it is left to them rather than freed under them.
  auto* lookup = new Lookup;
  lookup->found.assign(ranks.size(), 0);
  lookup->slots.resize(ranks.size());
  const int limit = 1;
  PMIX_INFO_CONSTRUCT(&lookup->limit);
  PMIX_INFO_LOAD(&lookup->limit, PMIX_TIMEOUT, &limit, PMIX_INT);
  auto done = [](pmix_status_t status, pmix_value_t*, void* data) {
    Slot* slot = static_cast<Slot*>(data);
    std::lock_guard<std::mutex> lock(slot->lookup->mu);
    slot->lookup->found[slot->index] = status == PMIX_SUCCESS;
    --slot->lookup->pending;
    slot->lookup->cv.notify_all();
  };
  for (size_t i = 0; i < ranks.size(); ++i) lookup->slots[i] = Slot{lookup, i};
  // Counted up front and the lock not held around PMIx_Get_nb: the callbacks run on PMIx's
  // progress thread, which a held lock would stall.
  lookup->pending = static_cast<int>(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) {
    pmix_proc_t peer;
    PMIX_LOAD_PROCID(&peer, me.nspace, static_cast<pmix_rank_t>(ranks[i]));
    if (PMIx_Get_nb(&peer, key.c_str(), &lookup->limit, 1, done, &lookup->slots[i]) != PMIX_SUCCESS) {
      std::lock_guard<std::mutex> lock(lookup->mu);
      --lookup->pending;
    }
  }
  std::vector<int> arrived;
  bool answered;
  {
    std::unique_lock<std::mutex> lock(lookup->mu);
    answered = lookup->cv.wait_for(lock, std::chrono::seconds(5),
                                   [&] { return lookup->pending == 0; });
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (lookup->found[i]) arrived.push_back(ranks[i]);
    }
  }
  if (answered) {
    PMIX_INFO_DESTRUCT(&lookup->limit);
    delete lookup;
  }
  return arrived;
}

}  // namespace
#endif

bool StartIsBounded() {
#if KOLO_WITH_PMIX
  return StartedByPmixLauncher();
#else
  return false;
#endif
}

StartFence::~StartFence() {
#if KOLO_WITH_PMIX
  if (held_) PMIx_Finalize(nullptr, 0);
#endif
}

Status StartFence::Await(double timeout_seconds, const std::vector<int>& requested,
                         const char* caller) {
#if KOLO_WITH_PMIX
  if (!StartedByPmixLauncher() || held_) return Status::OK();
  pmix_proc_t me;
  if (PMIx_Init(&me, nullptr, 0) != PMIX_SUCCESS) return Status::OK();  // MPI_Init will say
  held_ = true;
  pmix_proc_t job;
  PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
  pmix_value_t* size = nullptr;
  if (PMIx_Get(&job, PMIX_JOB_SIZE, nullptr, 0, &size) != PMIX_SUCCESS || !size) {
    return Status::OK();
  }
  uint32_t job_size = 0;
  pmix_status_t rc;
  PMIX_VALUE_GET_NUMBER(rc, size, job_size, uint32_t);
  PMIX_VALUE_RELEASE(size);
  if (rc != PMIX_SUCCESS) return Status::OK();
  std::vector<int> ranks;
  for (int r : requested) {
    // A rank outside the job, or a list without this rank, is the caller's mistake, which it
    // reports once MPI has started; no fence can include them.
    if (r >= 0 && static_cast<uint32_t>(r) < job_size) ranks.push_back(r);
  }
  if (!requested.empty() &&
      !std::binary_search(ranks.begin(), ranks.end(), static_cast<int>(me.rank))) {
    return Status::OK();
  }
  if (ranks.empty()) {
    for (uint32_t r = 0; r < job_size; ++r) ranks.push_back(static_cast<int>(r));
  }
  // A key per start, so a second kolo_init after kolo_shutdown does not find the first one's.
  static std::atomic<int> starts{0};
  const std::string key = "kolo.start." + std::to_string(starts++);
  pmix_value_t value;
  PMIX_VALUE_CONSTRUCT(&value);
  uint32_t mine = me.rank;
  PMIX_VALUE_LOAD(&value, &mine, PMIX_UINT32);
  if (PMIx_Put(PMIX_GLOBAL, key.c_str(), &value) != PMIX_SUCCESS || PMIx_Commit() != PMIX_SUCCESS) {
    PMIX_VALUE_DESTRUCT(&value);
    return Status::OK();
  }
  PMIX_VALUE_DESTRUCT(&value);

  std::vector<pmix_proc_t> procs(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) {
    PMIX_LOAD_PROCID(&procs[i], me.nspace, static_cast<pmix_rank_t>(ranks[i]));
  }
  int timeout = std::max(1, static_cast<int>(timeout_seconds + 0.5));
  bool collect = false;
  pmix_info_t info[2];
  PMIX_INFO_CONSTRUCT(&info[0]);
  PMIX_INFO_CONSTRUCT(&info[1]);
  PMIX_INFO_LOAD(&info[0], PMIX_TIMEOUT, &timeout, PMIX_INT);
  PMIX_INFO_LOAD(&info[1], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  const pmix_status_t fenced = PMIx_Fence(procs.data(), procs.size(), info, 2);
  PMIX_INFO_DESTRUCT(&info[0]);
  PMIX_INFO_DESTRUCT(&info[1]);
  if (fenced == PMIX_SUCCESS) return Status::OK();
  const std::string limit = " within " + SettingText(timeout) +
                            " s (KOLO_START_TIMEOUT=" + SettingText(timeout_seconds) + ")";
  if (fenced != PMIX_ERR_TIMEOUT) {
    return UnavailableError(std::string(caller) + ": the launcher's start fence failed: " +
                            PMIx_Error_string(fenced));
  }
  const std::vector<int> arrived = Arrived(me, ranks, key);
  std::vector<int> missing;
  for (int r : ranks) {
    if (!std::binary_search(arrived.begin(), arrived.end(), r)) missing.push_back(r);
  }
  if (missing.empty()) {
    return DeadlineExceededError(
        std::string(caller) + ": rank " + std::to_string(me.rank) + " arrived after the other " +
        "ranks had stopped waiting for it: every rank called " + caller + ", but not" + limit +
        " of each other");
  }
  return DeadlineExceededError(
      std::string(caller) + ": rank" + (missing.size() > 1 ? "s " : " ") + RankList(missing) +
      (missing.size() > 1 ? " have" : " has") + " not called " + caller + limit + "; rank" +
      (arrived.size() > 1 ? "s " : " ") + RankList(arrived) + (arrived.size() > 1 ? " have" : " has") +
      " (of " + std::to_string(ranks.size()) + " started by the launcher)");
#else
  (void)timeout_seconds;
  (void)requested;
  (void)caller;
  return Status::OK();
#endif
}

}  // namespace kolo
