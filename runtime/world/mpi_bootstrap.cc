#include "runtime/world/mpi_bootstrap.h"

#include <algorithm>
#include <string>
#include <utility>

#include "collectives/agree.h"
#include "collectives/mpi/mpi_call.h"
#include "collectives/mpi/mpi_communicator.h"
#include "collectives/mpi/mpi_node.h"
#include "runtime/world/mpi_world.h"

namespace kolo {
namespace {

class MpiBootstrap : public Bootstrap {
 public:
  // `base` is duplicated by Connect; `owned` says this object frees it afterwards (the
  // communicator of kolo_init_ranks), not the application.
  MpiBootstrap(MPI_Comm base, bool owned) : base_(base), owned_(owned) {}
  ~MpiBootstrap() override { FreeBase(); }

  std::string_view Name() const override { return "mpi"; }

  StatusOr<Transports> Connect(const Config& config) override {
    const size_t chunk = static_cast<size_t>(config.fusion_chunk_bytes);
    auto world = AttachToMpi(base_, chunk);
    FreeBase();
    if (!world.ok()) return world.status();
    admin_ = std::move(world->admin);
    // Before anything a transport does differently (ucx_bootstrap.h), so a job whose ranks
    // name different ones fails together instead of waiting in two kinds of calls.
    const GatherAll gather_all = [this](const std::string& mine, std::vector<std::string>* all) {
      return AllgatherBytes(mine, all);
    };
    Status same = AgreeOnString(gather_all, "KOLO_TRANSPORT", config.transport);
    if (!same.ok()) return same.AddContext("kolo_init");
    // Fails every rank together (a grouping that differs or does not parse), so no rank waits.
    auto node = MakeMpiNodeContext(world->data->comm(), config.node_grouping, chunk,
                                   world->data->liveness_check());
    if (!node.ok()) return Status(node.status()).AddContext("kolo_init");
    world->data->set_node(*node);
    Transports t;
    t.layout = world->layout;
    t.nodes = (*node)->map;
    t.control = std::move(world->control);
    t.data = std::move(world->data);
    return t;
  }

  int Size() const override { return admin_ ? admin_->Size() : 0; }

  Status AllgatherBytes(const std::string& mine, std::vector<std::string>* all) override {
    if (!admin_) return FailedPreconditionError("mpi bootstrap: all-gather before Connect");
    // A UCX world torn down after the application finalised MPI (ucx_bootstrap.h) skips its
    // final all-gather rather than calling MPI after MPI_Finalize.
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return FailedPreconditionError("mpi bootstrap: MPI is finalized");
    return GatherStrings(admin_->comm(), mine, all);
  }

  StatusOr<Transports> ConnectSubset(const std::vector<int>& ranks, const Config& config) override {
    if (!admin_) return FailedPreconditionError("mpi bootstrap: process set before Connect");
    const size_t chunk = static_cast<size_t>(config.fusion_chunk_bytes);
    auto world = AttachProcessSet(*admin_, ranks, chunk);
    if (!world.ok()) return world.status();
    Transports t;
    if (!world->control) return t;
    // Nodes of a set are its members' hosts: KOLO_NODE_GROUPING describes the whole job.
    auto node = MakeMpiNodeContext(world->data->comm(), "", chunk, world->data->liveness_check());
    if (!node.ok()) return node.status();
    world->data->set_node(*node);
    t.layout = world->layout;
    t.nodes = (*node)->map;
    t.control = std::move(world->control);
    t.data = std::move(world->data);
    return t;
  }

  Status CallBeforeExternalStop(void (*hook)()) override { return CallBeforeMpiFinalize(hook); }

 private:
  void FreeBase() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned_ && !finalized && base_ != MPI_COMM_NULL) MPI_Comm_free(&base_);
    owned_ = false;
  }

  MPI_Comm base_;
  bool owned_;
  // A dup of the base communicator for the out-of-band all-gathers and the process sets'
  // MPI_Comm_split, made from the application's threads only.
  std::unique_ptr<MpiCommunicator> admin_;
};

// The MPI_COMM_WORLD ranks of `comm`'s members, ascending: the ranks kolo_init_comm's start
// waits for. Empty (the whole job) when MPI has not started or `comm` is not a usable
// intracommunicator (kolo_init_comm then refuses it).
std::vector<int> WorldRanksOf(MPI_Comm comm) {
  int initialized = 0, finalized = 0, inter = 1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized || comm == MPI_COMM_NULL) return {};
  if (MPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) return {};
  MPI_Group group, world;
  int size = 0;
  MPI_Comm_group(comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  MPI_Group_size(group, &size);
  std::vector<int> mine(static_cast<size_t>(size)), theirs(static_cast<size_t>(size));
  for (int i = 0; i < size; ++i) mine[static_cast<size_t>(i)] = i;
  MPI_Group_translate_ranks(group, size, mine.data(), world, theirs.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  std::sort(theirs.begin(), theirs.end());
  return theirs;
}

}  // namespace

StatusOr<std::unique_ptr<Bootstrap>> MpiBootstrapOnWorld(double start_timeout_seconds) {
  KOLO_RETURN_IF_ERROR(EnsureMpi(start_timeout_seconds));
  return std::unique_ptr<Bootstrap>(new MpiBootstrap(MPI_COMM_WORLD, /*owned=*/false));
}

StatusOr<std::unique_ptr<Bootstrap>> MpiBootstrapOnRanks(const std::vector<int>& ranks,
                                                         double start_timeout_seconds) {
  // The listed ranks meet (when MPI has started; MPI_Init needs every rank of the job).
  std::vector<int> listed = ranks;
  std::sort(listed.begin(), listed.end());
  listed.erase(std::unique(listed.begin(), listed.end()), listed.end());
  KOLO_RETURN_IF_ERROR(EnsureMpi(start_timeout_seconds, listed));
  KOLO_ASSIGN_OR_RETURN(MPI_Comm base, CommOfWorldRanks(ranks));
  return std::unique_ptr<Bootstrap>(new MpiBootstrap(base, /*owned=*/true));
}

StatusOr<std::unique_ptr<Bootstrap>> MpiBootstrapOnComm(MPI_Comm comm,
                                                        double start_timeout_seconds) {
  KOLO_RETURN_IF_ERROR(EnsureMpi(start_timeout_seconds, WorldRanksOf(comm)));
  if (comm == MPI_COMM_NULL) {
    return InvalidArgumentError(
        "kolo_init_comm: the communicator is MPI_COMM_NULL (is this rank outside the group it "
        "was made from?)");
  }
  int inter = 0;
  const int rc = MPI_Comm_test_inter(comm, &inter);
  if (rc != MPI_SUCCESS) return MpiError(rc, "kolo_init_comm: MPI_Comm_test_inter");
  if (inter) {
    return InvalidArgumentError(
        "kolo_init_comm: an intercommunicator was given; kolo needs an intracommunicator");
  }
  return std::unique_ptr<Bootstrap>(new MpiBootstrap(comm, /*owned=*/false));
}

bool MpiThreadsMultiple() {
  int initialized = 0, finalized = 0, provided = MPI_THREAD_SINGLE;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return false;
  MPI_Query_thread(&provided);
  return provided >= MPI_THREAD_MULTIPLE;
}

}  // namespace kolo
