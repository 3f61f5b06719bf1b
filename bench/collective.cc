#include "bench/collective.h"

#include <climits>
#include <cstring>

namespace kolo::bench {
namespace {

const OpInfo& SumOp() { return *ParseOp("sum"); }

}  // namespace

CollectiveRunner::CollectiveRunner(const World& world, const MpiAllreducer& mpi,
                                   Collective collective, const DtypeInfo& dtype, const OpInfo& op,
                                   int root)
    : world_(world),
      mpi_(mpi),
      collective_(collective),
      dtype_(dtype),
      op_(op),
      root_(root),
      pattern_(dtype, CollectiveReduces(collective) ? op : SumOp(), world.size) {}

bool CollectiveRunner::HasInPlace(Collective collective, const std::string& path) {
  return path == "mpi" || collective == Collective::kAllreduce ||
         collective == Collective::kBroadcast;
}

std::string CollectiveRunner::OpColumn() const {
  return CollectiveReduces(collective_) ? std::string(op_.name) : "none";
}

int CollectiveRunner::RootColumn() const { return CollectiveHasRoot(collective_) ? root_ : -1; }

int64_t CollectiveRunner::InPlaceBytes(const CollectiveLayout& layout) const {
  return layout.bytes;
}

double CollectiveRunner::InputAt(int64_t j, const CollectiveLayout& layout) const {
  const int r = world_.rank;
  const int64_t n = world_.size;
  const int64_t c = layout.count;
  switch (collective_) {
    case Collective::kAllgather:
      return pattern_.Input(r, r * c + j);
    case Collective::kAlltoall:
      return pattern_.Input(r, ((j / c) * n + r) * c + j % c);
    default:
      return pattern_.Input(r, j);
  }
}

double CollectiveRunner::ExpectedAt(int64_t j, const CollectiveLayout& layout) const {
  const int64_t r = world_.rank;
  const int64_t n = world_.size;
  const int64_t c = layout.count;
  switch (collective_) {
    case Collective::kAllreduce:
      return pattern_.Expected(j);
    case Collective::kReducescatter:
      return pattern_.Expected(r * c + j);
    case Collective::kAllgather:
      return pattern_.Input(static_cast<int>(j / c), j);
    case Collective::kBroadcast:
      return pattern_.Input(root_, j);
    case Collective::kAlltoall:
      return pattern_.Input(static_cast<int>(j / c), (r * n + j / c) * c + j % c);
  }
  return 0;
}

void CollectiveRunner::FillInput(void* send, const CollectiveLayout& layout) const {
  for (int64_t j = 0; j < layout.send; ++j) StoreElement(send, j, dtype_, InputAt(j, layout));
}

void CollectiveRunner::FillInPlace(void* buffer, const CollectiveLayout& layout) const {
  const int64_t elements = std::max(layout.send, layout.recv);
  switch (collective_) {
    case Collective::kAllgather: {
      Poison(buffer, static_cast<size_t>(elements * static_cast<int64_t>(dtype_.size)));
      auto* own = static_cast<char*>(buffer) +
                  world_.rank * layout.count * static_cast<int64_t>(dtype_.size);
      for (int64_t k = 0; k < layout.count; ++k) StoreElement(own, k, dtype_, InputAt(k, layout));
      return;
    }
    case Collective::kBroadcast:
      if (world_.rank != root_) {
        Poison(buffer, static_cast<size_t>(elements * static_cast<int64_t>(dtype_.size)));
        return;
      }
      break;
    default:
      break;
  }
  for (int64_t j = 0; j < elements; ++j) StoreElement(buffer, j, dtype_, InputAt(j, layout));
}

void CollectiveRunner::Call(const std::string& path, const void* send, void* recv,
                            const CollectiveLayout& layout, const std::string& name,
                            bool capture) const {
  if (path == "mpi") {
    CallMpi(send, recv, layout);
  } else {
    CallKolo(send, recv, layout, name, capture);
  }
}

void CollectiveRunner::CallMpi(const void* send, void* recv, const CollectiveLayout& layout) const {
  const bool in_place = send == recv;
  const int64_t ts = static_cast<int64_t>(dtype_.size);
  const int64_t chunk = layout.count * ts;  // bytes per rank (allgather, alltoall), or all (bcast)
  if (chunk > INT_MAX) {
    Fail(world_, std::string(CollectiveName(collective_)) + ": " + std::to_string(chunk) +
                     " bytes exceed MPI's int count; use a smaller -e");
  }
  const int bytes = static_cast<int>(chunk);
  switch (collective_) {
    case Collective::kAllreduce:
      mpi_.Run(send, recv, layout.count, dtype_, op_);
      return;
    case Collective::kReducescatter:
      mpi_.ReduceScatter(send, recv, layout.count, dtype_, op_);
      return;
    case Collective::kAllgather:
      CheckMpi(world_,
               MPI_Allgather(in_place ? MPI_IN_PLACE : send, in_place ? 0 : bytes,
                             in_place ? MPI_DATATYPE_NULL : MPI_BYTE, recv, bytes, MPI_BYTE,
                             world_.comm),
               "MPI_Allgather");
      return;
    case Collective::kAlltoall:
      CheckMpi(
          world_,
          MPI_Alltoall(in_place ? MPI_IN_PLACE : send, in_place ? 0 : bytes,
                       in_place ? MPI_DATATYPE_NULL : MPI_BYTE, recv, bytes, MPI_BYTE, world_.comm),
          "MPI_Alltoall");
      return;
    case Collective::kBroadcast:
      if (!in_place && world_.rank == root_) std::memcpy(recv, send, static_cast<size_t>(bytes));
      CheckMpi(world_, MPI_Bcast(recv, bytes, MPI_BYTE, root_, world_.comm), "MPI_Bcast");
      return;
  }
}

void CollectiveRunner::CallKolo(const void* send, void* recv, const CollectiveLayout& layout,
                                const std::string& name, bool capture) const {
  const char* id = name.c_str();
  kolo_handle_t handle = nullptr;
  kolo_status_t status = KOLO_SUCCESS;
  const char* call = "";
  switch (collective_) {
    case Collective::kAllreduce: {
      call = "kolo_allreduce_async";
      const int64_t shape[1] = {layout.count};
      status =
          kolo_allreduce_async(id, send, recv, dtype_.kolo, 1, shape, op_.kolo, 1.0, 1.0, &handle);
      break;
    }
    case Collective::kBroadcast: {
      call = "kolo_broadcast_async";
      const int64_t shape[1] = {layout.count};
      status = kolo_broadcast_async(id, send, recv, dtype_.kolo, 1, shape, root_, &handle);
      break;
    }
    case Collective::kAllgather: {
      call = "kolo_allgather_async";
      const int64_t shape[1] = {layout.send};
      status = kolo_allgather_async(id, send, dtype_.kolo, 1, shape, &handle);
      break;
    }
    case Collective::kReducescatter: {
      call = "kolo_reducescatter_async";
      const int64_t shape[1] = {layout.send};
      status =
          kolo_reducescatter_async(id, send, dtype_.kolo, 1, shape, op_.kolo, 1.0, 1.0, &handle);
      break;
    }
    case Collective::kAlltoall: {
      call = "kolo_alltoall_async";
      const int64_t shape[1] = {layout.send};
      status = kolo_alltoall_async(id, send, dtype_.kolo, 1, shape, nullptr, &handle);
      break;
    }
  }
  CheckKolo(world_, status, call, id, nullptr);
  const bool owned_output = collective_ == Collective::kAllgather ||
                            collective_ == Collective::kReducescatter ||
                            collective_ == Collective::kAlltoall;
  if (capture && owned_output) {
    CheckKolo(world_, kolo_wait(handle), "kolo_wait", id, handle);
    const void* data = nullptr;
    int ndim = 0;
    int64_t shape[KOLO_MAX_DIMS] = {};
    CheckKolo(world_, kolo_handle_output(handle, &data, &ndim, shape), "kolo_handle_output", id,
              handle);
    if (ndim != 1 || shape[0] != layout.recv) {
      Fail(world_, std::string(call) + " '" + name + "': output of " + std::to_string(shape[0]) +
                       " elements (ndim " + std::to_string(ndim) + "), expected " +
                       std::to_string(layout.recv));
    }
    if (layout.recv > 0) {
      std::memcpy(recv, data, static_cast<size_t>(layout.recv) * dtype_.size);
    }
  }
  KoloFinish(world_, handle, id);
}

int64_t CollectiveRunner::CountWrong(const void* recv, const CollectiveLayout& layout,
                                     bool /*in_place*/, std::string* first_bad) const {
  int64_t wrong = 0;
  for (int64_t j = 0; j < layout.recv; ++j) {
    const double got = LoadElement(recv, j, dtype_);
    const double want = ExpectedAt(j, layout);
    if (got == want) continue;  // NaN (the poison) compares unequal
    if (wrong == 0 && first_bad != nullptr) {
      char text[160];
      std::snprintf(text, sizeof text, "element %lld: expected %.17g, got %.17g",
                    static_cast<long long>(j), want, got);
      *first_bad = text;
    }
    ++wrong;
  }
  return wrong;
}

}  // namespace kolo::bench
