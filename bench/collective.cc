#include "bench/collective.h"

#include <climits>
#include <cstring>

#include "bench/collective_index.h"

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

std::string CollectiveRunner::OpColumn() const {
  return CollectiveReduces(collective_) ? std::string(op_.name) : "none";
}

int CollectiveRunner::RootColumn() const { return CollectiveHasRoot(collective_) ? root_ : -1; }

int64_t CollectiveRunner::InPlaceBytes(const CollectiveLayout& layout) const {
  return layout.bytes;
}

double CollectiveRunner::Value(const PatternElement& e) const {
  return e.reduced ? pattern_.Expected(e.index) : pattern_.Input(e.rank, e.index);
}

double CollectiveRunner::InputAt(int64_t j, const CollectiveLayout& layout) const {
  return Value(SendElement(collective_, world_.rank, world_.size, root_, layout.count, j));
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
  const bool owned_output = collective_ == Collective::kAllgather ||
                            collective_ == Collective::kReducescatter ||
                            collective_ == Collective::kAlltoall;
  const bool in_place = send == recv;
  if (in_place && collective_ == Collective::kAllgather) {
    // nccl-tests' in-place all-gather: the input is this rank's part of the output buffer.
    send = static_cast<const char*>(recv) +
           world_.rank * layout.count * static_cast<int64_t>(dtype_.size);
  }
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
  if ((capture || in_place) && owned_output) {
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
      // In place, the output goes back into the one buffer (reduce-scatter: this rank's part of
      // it, as nccl-tests has it); the copy is part of the timed call.
      std::memcpy(static_cast<char*>(recv) + OutputOffset("kolo", in_place, layout) * dtype_.size,
                  data, static_cast<size_t>(layout.recv) * dtype_.size);
    }
  }
  KoloFinish(world_, handle, id);
}

int64_t CollectiveRunner::OutputOffset(const std::string& path, bool in_place,
                                       const CollectiveLayout& layout) const {
  const bool rank_part = path == "kolo" && in_place && collective_ == Collective::kReducescatter;
  return rank_part ? world_.rank * layout.count : 0;
}

int64_t CollectiveRunner::CountWrong(const std::string& path, const void* recv,
                                     const CollectiveLayout& layout, bool in_place,
                                     std::string* first_bad) const {
  const char* out = static_cast<const char*>(recv) +
                    OutputOffset(path, in_place, layout) * static_cast<int64_t>(dtype_.size);
  int64_t first = -1;
  const int64_t wrong = CountWrongElements(
      collective_, world_.rank, world_.size, root_, layout.count, layout.recv,
      [&](int64_t j) { return LoadElement(out, j, dtype_); },
      [&](const PatternElement& e) { return Value(e); }, &first);
  if (wrong > 0 && first_bad != nullptr) {
    const double want =
        Value(RecvElement(collective_, world_.rank, world_.size, root_, layout.count, first));
    char text[160];
    std::snprintf(text, sizeof text, "element %lld: expected %.17g, got %.17g",
                  static_cast<long long>(first), want, LoadElement(out, first, dtype_));
    *first_bad = text;
  }
  return wrong;
}

}  // namespace kolo::bench
