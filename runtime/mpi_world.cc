#include "runtime/mpi_world.h"

#include <cstdlib>

#include "base/logging.h"
#include "collectives/mpi/mpi_call.h"

namespace kolo {
namespace {

void FinalizeAtExit() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

Status EnsureMpi() {
  int initialized = 0, finalized = 0;
  KOLO_MPI_CALL(MPI_Finalized(&finalized));
  if (finalized) return FailedPreconditionError("kolo_init: MPI has already been finalized");
  KOLO_MPI_CALL(MPI_Initialized(&initialized));
  int provided = 0;
  if (!initialized) {
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
  return Status::OK();
}

Status Dup(MPI_Comm comm, MPI_Comm* out) {
  KOLO_MPI_CALL(MPI_Comm_dup(comm, out));
  return Status::OK();
}

}  // namespace

StatusOr<MpiWorld> AttachToMpi(size_t max_call_bytes) {
  KOLO_RETURN_IF_ERROR(EnsureMpi());
  MpiWorld w;
  MPI_Comm control, data, local, cross;
  KOLO_RETURN_IF_ERROR(Dup(MPI_COMM_WORLD, &control));
  KOLO_RETURN_IF_ERROR(Dup(MPI_COMM_WORLD, &data));
  w.control = std::make_unique<MpiCommunicator>(control, max_call_bytes);
  w.data = std::make_unique<MpiCommunicator>(data, max_call_bytes);
  RankLayout& l = w.layout;
  l.rank = w.data->Rank();
  l.size = w.data->Size();
  KOLO_MPI_CALL(MPI_Comm_split_type(data, MPI_COMM_TYPE_SHARED, l.rank, MPI_INFO_NULL, &local));
  KOLO_MPI_CALL(MPI_Comm_rank(local, &l.local_rank));
  KOLO_MPI_CALL(MPI_Comm_size(local, &l.local_size));
  KOLO_MPI_CALL(MPI_Comm_split(data, l.local_rank, l.rank, &cross));
  KOLO_MPI_CALL(MPI_Comm_rank(cross, &l.cross_rank));
  KOLO_MPI_CALL(MPI_Comm_size(cross, &l.cross_size));
  MPI_Comm_free(&local);
  MPI_Comm_free(&cross);
  return w;
}

}  // namespace kolo
