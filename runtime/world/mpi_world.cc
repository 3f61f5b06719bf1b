#include "runtime/world/mpi_world.h"

#include "runtime/config.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "base/logging.h"
#include "base/rank_list.h"
#include "collectives/mpi/mpi_call.h"
#include "collectives/mpi/tcp_defaults.h"
#include "runtime/peer_watch.h"
#include "runtime/world/start_fence.h"

namespace kolo {
namespace {

void FinalizeAtExit() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

}  // namespace

Status EnsureMpi(double start_timeout_seconds, const std::vector<int>& world_ranks) {
  int initialized = 0, finalized = 0;
  KOLO_MPI_CALL(MPI_Finalized(&finalized));
  if (finalized) return FailedPreconditionError("kolo_init: MPI has already been finalized");
  KOLO_MPI_CALL(MPI_Initialized(&initialized));
  // Every rank must be here before MPI_Init, or kolo's first collective call when the
  // application started MPI itself, waits for all of them with no limit. Held until MPI_Init
  // has returned (see StartFence's destructor).
  StartFence fence;
  if (start_timeout_seconds > 0) {
    KOLO_RETURN_IF_ERROR(fence.Await(start_timeout_seconds,
                                     initialized ? world_ranks : std::vector<int>{}, "kolo_init"));
  }
  int provided = 0;
  if (!initialized) {
    const OpenMpiTcpDefaults tcp;  // pairwise exchanges both ways at the link's rate
    KOLO_MPI_CALL(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
    std::atexit(FinalizeAtExit);
  } else {
    KOLO_MPI_CALL(MPI_Query_thread(&provided));
  }
  // kolo's background thread calls MPI while the application's threads may too.
  if (provided < MPI_THREAD_SERIALIZED) {
    return FailedPreconditionError(
        "kolo_init: MPI provides thread level " + std::to_string(provided) +
        " but kolo needs at least MPI_THREAD_SERIALIZED (initialise MPI with MPI_Init_thread "
        "and MPI_THREAD_MULTIPLE)");
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    KOLO_LOG_WARNING("init",
                     "MPI was initialised with MPI_THREAD_SERIALIZED: the application must not "
                     "call MPI while kolo is initialised (use MPI_THREAD_MULTIPLE to do both)");
  }
  return Status::OK();
}

namespace {

Status Dup(MPI_Comm comm, MPI_Comm* out) {
  KOLO_MPI_CALL(MPI_Comm_dup(comm, out));
  return Status::OK();
}

}  // namespace

namespace {

// Control and data communicators over `base` (dups) and the layout inside it.
StatusOr<MpiWorld> AttachToComm(MPI_Comm base, size_t max_call_bytes, bool watch_peers) {
  MpiWorld w;
  MPI_Comm control, data, local, cross;
  KOLO_RETURN_IF_ERROR(Dup(base, &control));
  KOLO_RETURN_IF_ERROR(Dup(base, &data));
  w.control = std::make_unique<MpiCommunicator>(control, max_call_bytes);
  w.data = std::make_unique<MpiCommunicator>(data, max_call_bytes);
  RankLayout& l = w.layout;
  l.rank = w.data->Rank();
  l.size = w.data->Size();
  KOLO_MPI_CALL(MPI_Comm_split_type(data, MPI_COMM_TYPE_SHARED, l.rank, MPI_INFO_NULL, &local));
  KOLO_MPI_CALL(MPI_Comm_rank(local, &l.local_rank));
  KOLO_MPI_CALL(MPI_Comm_size(local, &l.local_size));
  if (watch_peers) {
    // Every local peer's pid, for runtime/peer_watch.h.
    const int pid = static_cast<int>(getpid());
    std::vector<int> pairs(2 * static_cast<size_t>(l.local_size));
    const int mine[2] = {l.rank, pid};
    KOLO_MPI_CALL(MPI_Allgather(mine, 2, MPI_INT, pairs.data(), 2, MPI_INT, local));
    std::vector<LocalPeer> peers;
    for (int i = 0; i < l.local_size; ++i) {
      peers.push_back(LocalPeer{pairs[2 * i], pairs[2 * i + 1]});
    }
    char host[MPI_MAX_PROCESSOR_NAME] = {};
    int host_len = 0;
    MPI_Get_processor_name(host, &host_len);
    WatchPeers(l.rank, l.size, std::string(host, host_len), peers);
  }
  // The peer table covers every rank of the job, so process sets use it too.
  w.control->set_liveness_check(CheckPeers);
  // The data plane too: kolo's own algorithms wait on point-to-point messages and
  // shared-memory flags, which a dead peer would never answer.
  w.data->set_liveness_check(CheckPeers);
  KOLO_MPI_CALL(MPI_Comm_split(data, l.local_rank, l.rank, &cross));
  KOLO_MPI_CALL(MPI_Comm_rank(cross, &l.cross_rank));
  KOLO_MPI_CALL(MPI_Comm_size(cross, &l.cross_size));
  MPI_Comm_free(&local);
  MPI_Comm_free(&cross);
  return w;
}

}  // namespace

StatusOr<MPI_Comm> CommOfWorldRanks(const std::vector<int>& ranks) {
  int world_rank = 0, world_size = 0;
  KOLO_MPI_CALL(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
  KOLO_MPI_CALL(MPI_Comm_size(MPI_COMM_WORLD, &world_size));
  const std::string what = "kolo_init_ranks " + BracketedRanks(ranks) + ": ";
  if (ranks.empty()) return InvalidArgumentError(what + "the list of ranks is empty");
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  if (sorted.front() < 0 || sorted.back() >= world_size) {
    return InvalidArgumentError(what + "a rank is outside MPI_COMM_WORLD [0, " +
                                std::to_string(world_size) + ")");
  }
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    return InvalidArgumentError(what + "a rank is listed twice");
  }
  // Only members may call MPI_Comm_create_group; the others must not wait for them.
  if (!std::binary_search(sorted.begin(), sorted.end(), world_rank)) {
    return InvalidArgumentError(what + "this process (MPI_COMM_WORLD rank " +
                                std::to_string(world_rank) +
                                ") is not listed; only the listed ranks call it");
  }
  MPI_Group world_group, group;
  KOLO_MPI_CALL(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
  const int err = MPI_Group_incl(world_group, static_cast<int>(ranks.size()), ranks.data(), &group);
  MPI_Group_free(&world_group);
  if (err != MPI_SUCCESS) return MpiError(err, "MPI_Group_incl");
  MPI_Comm comm = MPI_COMM_NULL;
  // A tag of kolo's own, so that a concurrent MPI_Comm_create_group of the application's over
  // the same ranks cannot be matched with this one.
  constexpr int kCreateTag = 0x6b6f6c;
  const int created = MPI_Comm_create_group(MPI_COMM_WORLD, group, kCreateTag, &comm);
  MPI_Group_free(&group);
  if (created != MPI_SUCCESS) return MpiError(created, "MPI_Comm_create_group");
  return comm;
}

StatusOr<MpiWorld> AttachToMpi(MPI_Comm base, size_t max_call_bytes) {
  auto w = AttachToComm(base, max_call_bytes, /*watch_peers=*/true);
  if (!w.ok()) return w;
  MPI_Comm admin;
  KOLO_RETURN_IF_ERROR(Dup(base, &admin));
  w->admin = std::make_unique<MpiCommunicator>(admin, max_call_bytes);
  return w;
}

StatusOr<MpiWorld> AttachProcessSet(MpiCommunicator& admin, const std::vector<int>& ranks,
                                    size_t max_call_bytes) {
  const bool member = std::binary_search(ranks.begin(), ranks.end(), admin.Rank());
  MPI_Comm set;
  KOLO_MPI_CALL(MPI_Comm_split(admin.comm(), member ? 0 : MPI_UNDEFINED, admin.Rank(), &set));
  if (!member) return MpiWorld{};
  auto w = AttachToComm(set, max_call_bytes, /*watch_peers=*/false);
  MPI_Comm_free(&set);
  return w;
}

namespace {
void (*g_finalize_hook)() = nullptr;

int RunFinalizeHook(MPI_Comm, int, void*, void*) {
  if (g_finalize_hook) g_finalize_hook();
  return MPI_SUCCESS;
}
}  // namespace

Status CallBeforeMpiFinalize(void (*hook)()) {
  static int keyval = MPI_KEYVAL_INVALID;
  g_finalize_hook = hook;
  if (keyval != MPI_KEYVAL_INVALID) return Status::OK();
  KOLO_MPI_CALL(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &RunFinalizeHook, &keyval, nullptr));
  KOLO_MPI_CALL(MPI_Comm_set_attr(MPI_COMM_SELF, keyval, nullptr));
  return Status::OK();
}

}  // namespace kolo
