#include "collectives/mpi/mpi_communicator.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "collectives/mpi/mpi_call.h"
#include "collectives/reduce.h"

namespace kolo {

Status MpiError(int code, const char* call) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(code, text, &len);
  int rank = -1;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char host[128] = {0};
  gethostname(host, sizeof(host) - 1);
  return InternalError(std::string(call) + " failed: " + std::string(text, len) + " (rank " +
                       std::to_string(rank) + " on " + host + ")");
}

namespace {

// kolo's 16-bit float types and its user-defined reductions, created once per process. The
// reductions run kolo's own kernels and serve the dtypes MPI cannot reduce itself (float16,
// bfloat16) and the ones Open MPI 4.1 reduces wrongly: its op/avx component adds 8- and 16-bit
// integers with saturating vector instructions (open-mpi/ompi#8045), where kolo wraps.
struct KoloMpiTypes {
  MPI_Datatype f16 = MPI_DATATYPE_NULL;
  MPI_Datatype bf16 = MPI_DATATYPE_NULL;
  MPI_Op sum = MPI_OP_NULL, min = MPI_OP_NULL, max = MPI_OP_NULL, prod = MPI_OP_NULL;
  bool ready = false;
};
KoloMpiTypes g_types;
std::mutex g_types_mu;

bool DtypeFromMpi(MPI_Datatype t, DataType* out) {
  if (t == g_types.f16) *out = DataType::kFloat16;
  else if (t == g_types.bf16) *out = DataType::kBFloat16;
  else if (t == MPI_INT8_T) *out = DataType::kInt8;
  else if (t == MPI_UINT8_T) *out = DataType::kUInt8;
  else if (t == MPI_INT16_T) *out = DataType::kInt16;
  else if (t == MPI_UINT16_T) *out = DataType::kUInt16;
  else return false;
  return true;
}

template <ReduceOp kOp>
void KoloReduce(void* in, void* inout, int* len, MPI_Datatype* type) {
  DataType dtype;
  // Only ever registered for the types DtypeFromMpi knows (MpiOpFor below).
  if (!DtypeFromMpi(*type, &dtype)) return;
  // MPI user functions compute inout = in (op) inout; all these ops are commutative.
  (void)ReduceInto(inout, in, static_cast<size_t>(*len), dtype, kOp);
}

Status EnsureKoloTypes() {
  std::lock_guard<std::mutex> lock(g_types_mu);
  if (g_types.ready) return Status::OK();
  KOLO_MPI_CALL(MPI_Type_contiguous(2, MPI_BYTE, &g_types.f16));
  KOLO_MPI_CALL(MPI_Type_commit(&g_types.f16));
  KOLO_MPI_CALL(MPI_Type_contiguous(2, MPI_BYTE, &g_types.bf16));
  KOLO_MPI_CALL(MPI_Type_commit(&g_types.bf16));
  KOLO_MPI_CALL(MPI_Op_create(&KoloReduce<ReduceOp::kSum>, 1, &g_types.sum));
  KOLO_MPI_CALL(MPI_Op_create(&KoloReduce<ReduceOp::kMin>, 1, &g_types.min));
  KOLO_MPI_CALL(MPI_Op_create(&KoloReduce<ReduceOp::kMax>, 1, &g_types.max));
  KOLO_MPI_CALL(MPI_Op_create(&KoloReduce<ReduceOp::kProduct>, 1, &g_types.prod));
  g_types.ready = true;
  return Status::OK();
}

}  // namespace

Status MpiTypeFor(DataType dtype, MPI_Datatype* out) {
  switch (dtype) {
    case DataType::kUInt8: *out = MPI_UINT8_T; return Status::OK();
    case DataType::kInt8: *out = MPI_INT8_T; return Status::OK();
    case DataType::kUInt16: *out = MPI_UINT16_T; return Status::OK();
    case DataType::kInt16: *out = MPI_INT16_T; return Status::OK();
    case DataType::kInt32: *out = MPI_INT32_T; return Status::OK();
    case DataType::kInt64: *out = MPI_INT64_T; return Status::OK();
    case DataType::kFloat32: *out = MPI_FLOAT; return Status::OK();
    case DataType::kFloat64: *out = MPI_DOUBLE; return Status::OK();
    case DataType::kBool: *out = MPI_UINT8_T; return Status::OK();
    case DataType::kFloat16:
    case DataType::kBFloat16:
      KOLO_RETURN_IF_ERROR(EnsureKoloTypes());
      *out = dtype == DataType::kFloat16 ? g_types.f16 : g_types.bf16;
      return Status::OK();
  }
  return InvalidArgumentError("no MPI datatype for dtype " + std::to_string(int(dtype)));
}

Status MpiOpFor(DataType dtype, ReduceOp op, MPI_Op* out) {
  const bool narrow_int = dtype == DataType::kInt8 || dtype == DataType::kUInt8 ||
                          dtype == DataType::kInt16 || dtype == DataType::kUInt16;
  if (IsHalf(dtype) || (narrow_int && (op == ReduceOp::kSum || op == ReduceOp::kProduct))) {
    KOLO_RETURN_IF_ERROR(EnsureKoloTypes());
    switch (op) {
      case ReduceOp::kSum: *out = g_types.sum; return Status::OK();
      case ReduceOp::kMin: *out = g_types.min; return Status::OK();
      case ReduceOp::kMax: *out = g_types.max; return Status::OK();
      case ReduceOp::kProduct: *out = g_types.prod; return Status::OK();
      default: break;
    }
  } else if (dtype == DataType::kBool) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kMax: *out = MPI_LOR; return Status::OK();
      case ReduceOp::kMin:
      case ReduceOp::kProduct: *out = MPI_LAND; return Status::OK();
      default: break;
    }
  } else {
    switch (op) {
      case ReduceOp::kSum: *out = MPI_SUM; return Status::OK();
      case ReduceOp::kMin: *out = MPI_MIN; return Status::OK();
      case ReduceOp::kMax: *out = MPI_MAX; return Status::OK();
      case ReduceOp::kProduct: *out = MPI_PROD; return Status::OK();
      default: break;
    }
  }
  return InvalidArgumentError("no MPI reduction for " + std::string(ReduceOpName(op)) + " on " +
                              std::string(DataTypeName(dtype)));
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, size_t max_call_bytes)
    : comm_(comm), max_call_bytes_(std::max<size_t>(max_call_bytes, 64)) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  // Collective, as is making `comm` (every caller makes one on every rank of it).
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS &&
      node != MPI_COMM_NULL) {
    int node_size = size_;
    MPI_Comm_size(node, &node_size);
    spans_nodes_ = node_size < size_;
    MPI_Comm_free(&node);
  }
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

// A blocking call cannot be left: a peer on another node that stops answering without dying
// (its link cut, its host frozen) would hold this thread inside MPI forever, and no launcher or
// socket error ends that. So across nodes the call's non-blocking twin, completed by WaitAll,
// whose progress check names the ranks it waits on; inside one node the blocking call (the
// header says why).
template <typename BlockingCall, typename StartCall>
Status MpiCommunicator::Collective(const char* blocking_name, BlockingCall blocking,
                                   const char* start_name, StartCall start) const {
  if (!spans_nodes_) {
    const int rc = blocking();
    return rc == MPI_SUCCESS ? Status::OK() : MpiError(rc, blocking_name);
  }
  MPI_Request request;
  const int rc = start(&request);
  if (rc != MPI_SUCCESS) return MpiError(rc, start_name);
  return WaitAll(1, &request, [&] { return std::string(start_name) + " with " + PeersText(); });
}

Status MpiCommunicator::Allreduce(const void* send, void* recv, size_t count, DataType dtype,
                                  ReduceOp op) {
  MPI_Datatype type;
  MPI_Op mpi_op;
  KOLO_RETURN_IF_ERROR(MpiTypeFor(dtype, &type));
  KOLO_RETURN_IF_ERROR(MpiOpFor(dtype, op, &mpi_op));
  const size_t esize = DataTypeSize(dtype);
  const size_t piece = std::max<size_t>(1, std::min<size_t>(max_call_bytes_ / esize, INT_MAX));
  const bool in_place = send == recv;
  for (size_t done = 0; done < count; done += piece) {
    const int n = static_cast<int>(std::min(piece, count - done));
    char* r = static_cast<char*>(recv) + done * esize;
    const void* s = in_place ? MPI_IN_PLACE : static_cast<const char*>(send) + done * esize;
    KOLO_RETURN_IF_ERROR(Collective(
        "MPI_Allreduce", [&] { return MPI_Allreduce(s, r, n, type, mpi_op, comm_); },
        "MPI_Iallreduce",
        [&](MPI_Request* req) { return MPI_Iallreduce(s, r, n, type, mpi_op, comm_, req); }));
  }
  return Status::OK();
}

Status MpiCommunicator::Allgatherv(const void* send, size_t send_bytes, void* recv,
                                   const std::vector<size_t>& recv_bytes) {
  if (recv_bytes.size() != static_cast<size_t>(size_)) {
    return InvalidArgumentError("Allgatherv: " + std::to_string(recv_bytes.size()) +
                                " counts for " + std::to_string(size_) + " ranks");
  }
  size_t total = 0;
  bool fits = true;
  for (size_t b : recv_bytes) {
    if (b > INT_MAX || total > INT_MAX) fits = false;
    total += b;
  }
  if (total > INT_MAX) fits = false;
  if (fits) {
    std::vector<int> counts(size_), displs(size_);
    size_t off = 0;
    for (int r = 0; r < size_; ++r) {
      counts[r] = static_cast<int>(recv_bytes[r]);
      displs[r] = static_cast<int>(off);
      off += recv_bytes[r];
    }
    // Our own block is copied by MPI from `send`, so recv never needs to alias it.
    const int n = static_cast<int>(send_bytes);
    return Collective(
        "MPI_Allgatherv",
        [&] {
          return MPI_Allgatherv(send, n, MPI_BYTE, recv, counts.data(), displs.data(), MPI_BYTE,
                                comm_);
        },
        "MPI_Iallgatherv",
        [&](MPI_Request* req) {
          return MPI_Iallgatherv(send, n, MPI_BYTE, recv, counts.data(), displs.data(), MPI_BYTE,
                                 comm_, req);
        });
  }
  // Beyond int counts: each rank's block is broadcast from its owner, in pieces.
  size_t off = 0;
  for (int r = 0; r < size_; ++r) {
    char* block = static_cast<char*>(recv) + off;
    if (r == rank_ && send_bytes) std::memmove(block, send, send_bytes);
    KOLO_RETURN_IF_ERROR(Broadcast(block, recv_bytes[r], r));
    off += recv_bytes[r];
  }
  return Status::OK();
}

Status MpiCommunicator::ReduceScatter(const void* send, void* recv,
                                      const std::vector<size_t>& counts, DataType dtype,
                                      ReduceOp op) {
  if (counts.size() != static_cast<size_t>(size_)) {
    return InvalidArgumentError("ReduceScatter: " + std::to_string(counts.size()) +
                                " counts for " + std::to_string(size_) + " ranks");
  }
  MPI_Datatype type;
  MPI_Op mpi_op;
  KOLO_RETURN_IF_ERROR(MpiTypeFor(dtype, &type));
  KOLO_RETURN_IF_ERROR(MpiOpFor(dtype, op, &mpi_op));
  const size_t esize = DataTypeSize(dtype);
  size_t total = 0, offset = 0;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) offset = total;
    total += counts[r];
  }
  if (total <= INT_MAX) {
    // Every count fits an int, and so does every displacement MPI computes internally.
    std::vector<int> n(size_);
    for (int r = 0; r < size_; ++r) n[r] = static_cast<int>(counts[r]);
    return Collective(
        "MPI_Reduce_scatter",
        [&] { return MPI_Reduce_scatter(send, recv, n.data(), type, mpi_op, comm_); },
        "MPI_Ireduce_scatter",
        [&](MPI_Request* req) {
          return MPI_Ireduce_scatter(send, recv, n.data(), type, mpi_op, comm_, req);
        });
  }
  // Beyond int counts: an all-reduce of the whole buffer (cut into pieces by Allreduce) into a
  // scratch buffer, of which this rank keeps its block. Twice the bytes on the wire of a real
  // reduce-scatter, but only for tensors over 2^31 elements.
  std::unique_ptr<char[]> scratch(new (std::nothrow) char[total * esize]);
  if (!scratch) {
    return ResourceExhaustedError("ReduceScatter: cannot allocate " +
                                  std::to_string(total * esize) + " scratch bytes");
  }
  KOLO_RETURN_IF_ERROR(Allreduce(send, scratch.get(), total, dtype, op));
  if (counts[rank_]) std::memcpy(recv, scratch.get() + offset * esize, counts[rank_] * esize);
  return Status::OK();
}

Status MpiCommunicator::Alltoallv(const void* send, const std::vector<size_t>& send_bytes,
                                  void* recv, const std::vector<size_t>& recv_bytes) {
  if (send_bytes.size() != static_cast<size_t>(size_) ||
      recv_bytes.size() != static_cast<size_t>(size_)) {
    return InvalidArgumentError("Alltoallv: counts for " + std::to_string(send_bytes.size()) +
                                "/" + std::to_string(recv_bytes.size()) + " ranks, not " +
                                std::to_string(size_));
  }
  std::vector<size_t> send_off(size_), recv_off(size_);
  size_t send_total = 0, recv_total = 0;
  for (int r = 0; r < size_; ++r) {
    send_off[r] = send_total;
    recv_off[r] = recv_total;
    send_total += send_bytes[r];
    recv_total += recv_bytes[r];
  }
  if (send_total <= INT_MAX && recv_total <= INT_MAX) {
    std::vector<int> sc(size_), sd(size_), rc(size_), rd(size_);
    for (int r = 0; r < size_; ++r) {
      sc[r] = static_cast<int>(send_bytes[r]);
      sd[r] = static_cast<int>(send_off[r]);
      rc[r] = static_cast<int>(recv_bytes[r]);
      rd[r] = static_cast<int>(recv_off[r]);
    }
    return Collective(
        "MPI_Alltoallv",
        [&] {
          return MPI_Alltoallv(send, sc.data(), sd.data(), MPI_BYTE, recv, rc.data(), rd.data(),
                               MPI_BYTE, comm_);
        },
        "MPI_Ialltoallv",
        [&](MPI_Request* req) {
          return MPI_Ialltoallv(send, sc.data(), sd.data(), MPI_BYTE, recv, rc.data(), rd.data(),
                                MPI_BYTE, comm_, req);
        });
  }
  // Beyond int counts: pairwise exchanges (step s: send to rank+s, receive from rank-s), each
  // cut into INT_MAX-byte pieces by SendRecv.
  constexpr int kTag = 0x6b61;
  for (int s = 0; s < size_; ++s) {
    const int dst = (rank_ + s) % size_, src = (rank_ - s + size_) % size_;
    const char* out = static_cast<const char*>(send) + send_off[dst];
    char* in = static_cast<char*>(recv) + recv_off[src];
    if (s == 0) {
      if (send_bytes[dst] != recv_bytes[src]) {
        return InvalidArgumentError("Alltoallv: this rank sends itself " +
                                    std::to_string(send_bytes[dst]) + " bytes but expects " +
                                    std::to_string(recv_bytes[src]));
      }
      if (send_bytes[dst]) std::memcpy(in, out, send_bytes[dst]);
      continue;
    }
    KOLO_RETURN_IF_ERROR(SendRecv(out, send_bytes[dst], dst, in, recv_bytes[src], src, kTag)
                             .AddContext("Alltoallv step " + std::to_string(s)));
  }
  return Status::OK();
}

Status MpiCommunicator::Broadcast(void* buffer, size_t bytes, int root) {
  const size_t piece = std::max<size_t>(max_call_bytes_, size_t{1} << 26);
  for (size_t done = 0; done < bytes; done += piece) {
    const int n = static_cast<int>(std::min<size_t>(std::min<size_t>(piece, INT_MAX), bytes - done));
    char* data = static_cast<char*>(buffer) + done;
    KOLO_RETURN_IF_ERROR(Collective(
        "MPI_Bcast", [&] { return MPI_Bcast(data, n, MPI_BYTE, root, comm_); }, "MPI_Ibcast",
        [&](MPI_Request* req) { return MPI_Ibcast(data, n, MPI_BYTE, root, comm_, req); }));
  }
  return Status::OK();
}

Status MpiCommunicator::Barrier() {
  return Collective(
      "MPI_Barrier", [&] { return MPI_Barrier(comm_); }, "MPI_Ibarrier",
      [&](MPI_Request* req) { return MPI_Ibarrier(comm_, req); });
}

Status MpiCommunicator::WaitAll(int n, MPI_Request* requests,
                                const std::function<std::string()>& waiting_for) const {
  // Spinning first, as MPI's blocking calls do: each test is what moves a transfer (or a
  // non-blocking collective's next step) along; then yielding the core (ranks may outnumber
  // cores, docs/machine-notes.md); once a second after the first, the checks.
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto next_check = start + std::chrono::seconds(1);
  for (uint64_t polls = 0;; ++polls) {
    int done = 0;
    KOLO_MPI_CALL(MPI_Testall(n, requests, &done, MPI_STATUSES_IGNORE));
    if (done) return Status::OK();
    if (polls > 64) sched_yield();
    if ((polls & 1023) != 0) continue;
    const auto now = Clock::now();
    if (now < next_check) continue;
    // The requests stay posted (MPI cannot cancel a collective): the runtime stops using this
    // communicator after an error.
    if (liveness_check_) KOLO_RETURN_IF_ERROR(liveness_check_());
    KOLO_RETURN_IF_ERROR(CheckProgress(start, waiting_for()));
    next_check = now + std::chrono::seconds(1);
  }
}

std::string MpiCommunicator::PeersText() const {
  // The other ranks as MPI_COMM_WORLD numbers them (kolo's ranks unless kolo was started on
  // another communicator): a sub-communicator's own numbers would mean nothing to a reader.
  MPI_Group mine, world;
  MPI_Comm_group(comm_, &mine);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  std::vector<int> local(size_), global(size_, MPI_UNDEFINED);
  for (int r = 0; r < size_; ++r) local[r] = r;
  MPI_Group_translate_ranks(mine, size_, local.data(), world, global.data());
  MPI_Group_free(&mine);
  MPI_Group_free(&world);
  std::string out = size_ > 2 ? "world ranks " : "world rank ";
  bool first = true;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    if (!first) out += ",";
    out += global[r] == MPI_UNDEFINED ? "?" : std::to_string(global[r]);
    first = false;
  }
  return out;
}

Status MpiCommunicator::WaitPolled(MPI_Request* request) {
  // A blocking MPI collective busy-polls until the slowest rank arrives; the negotiation's
  // ranks are routinely up to a cycle apart, and on a machine with as many ranks as cores that
  // spinning starves the application's own threads (and its MPI calls). So: spin briefly for
  // the common in-step case, then test at intervals that sleep.
  //
  // Each interval is a quarter of the time waited so far (5 us after the spin, at most 200 us),
  // and the background thread's timer slack is 1 us (base/precise_timers.h), so each test
  // comes at most a quarter of the wait (and at most 200 us) after a peer's arrival; a
  // collective that needs several rounds of tests (libnbc moves only inside MPI_Test) can pay
  // that once per round. A rank that notices late is late in turn for the next step, where its
  // peer waits for it: with doubling intervals (10 us to 200 us) and the default 50 us slack,
  // two ranks took turns at oversleeping and ran whole runs of dependent all-reduces at 2-4x
  // their usual time (docs/benchmarks.md, "Oversleeping in the negotiation").
  using Clock = std::chrono::steady_clock;
  constexpr auto kSpin = std::chrono::microseconds(20);
  constexpr auto kMaxPause = std::chrono::microseconds(200);
  const auto start = Clock::now();
  auto next_liveness_check = start + std::chrono::seconds(1);
  while (true) {
    int done = 0;
    KOLO_MPI_CALL(MPI_Test(request, &done, MPI_STATUS_IGNORE));
    if (done) return Status::OK();
    const auto now = Clock::now();
    const auto waited = now - start;
    if (waited < kSpin) continue;
    if (now >= next_liveness_check) {
      // The request stays posted: MPI has no way to cancel a collective, and the runtime stops
      // using this communicator after an error. Every rank's background thread negotiates
      // every cycle, so a wait here that lasts is a rank that stopped running (the progress
      // check: frozen, or its runtime stopped), not one that is merely busy.
      if (liveness_check_) KOLO_RETURN_IF_ERROR(liveness_check_());
      KOLO_RETURN_IF_ERROR(
          CheckProgress(start, "the other ranks of the collective, " + PeersText()));
      next_liveness_check = now + std::chrono::seconds(1);
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(waited / 4, kMaxPause));
  }
}

Status MpiCommunicator::GatherBytes(const std::string& mine, std::vector<std::string>* all,
                                    int root) {
  if (mine.size() > INT_MAX) return InvalidArgumentError("GatherBytes: message over 2 GiB");
  int my_len = static_cast<int>(mine.size());
  std::vector<int> lens(rank_ == root ? size_ : 0);
  MPI_Request req;
  KOLO_MPI_CALL(MPI_Igather(&my_len, 1, MPI_INT, lens.data(), 1, MPI_INT, root, comm_, &req));
  KOLO_RETURN_IF_ERROR(WaitPolled(&req));
  std::vector<int> displs;
  std::string joined;
  if (rank_ == root) {
    displs.resize(size_);
    int64_t off = 0;
    for (int r = 0; r < size_; ++r) {
      displs[r] = static_cast<int>(off);
      off += lens[r];
      if (off > INT_MAX) return InvalidArgumentError("GatherBytes: total over 2 GiB");
    }
    joined.resize(off);
  }
  KOLO_MPI_CALL(MPI_Igatherv(mine.data(), my_len, MPI_BYTE, joined.data(), lens.data(),
                             displs.data(), MPI_BYTE, root, comm_, &req));
  KOLO_RETURN_IF_ERROR(WaitPolled(&req));
  if (rank_ == root) {
    all->assign(size_, std::string());
    for (int r = 0; r < size_; ++r) (*all)[r] = joined.substr(displs[r], lens[r]);
  }
  return Status::OK();
}

Status MpiCommunicator::BroadcastBytes(std::string* bytes, int root) {
  if (bytes->size() > INT_MAX) return InvalidArgumentError("BroadcastBytes: message over 2 GiB");
  int len = rank_ == root ? static_cast<int>(bytes->size()) : 0;
  MPI_Request req;
  KOLO_MPI_CALL(MPI_Ibcast(&len, 1, MPI_INT, root, comm_, &req));
  KOLO_RETURN_IF_ERROR(WaitPolled(&req));
  if (rank_ != root) bytes->resize(static_cast<size_t>(len));
  if (len == 0) return Status::OK();
  KOLO_MPI_CALL(MPI_Ibcast(bytes->data(), len, MPI_BYTE, root, comm_, &req));
  return WaitPolled(&req);
}

Status MpiCommunicator::AndBits(uint64_t* words, size_t count) {
  if (count > INT_MAX) return InvalidArgumentError("AndBits: more than 2^31-1 words");
  MPI_Request req;
  KOLO_MPI_CALL(MPI_Iallreduce(MPI_IN_PLACE, words, static_cast<int>(count), MPI_UINT64_T,
                               MPI_BAND, comm_, &req));
  return WaitPolled(&req);
}

Status MpiCommunicator::GatherWords(const uint64_t* mine, size_t count, uint64_t* all, int root) {
  if (count > INT_MAX) return InvalidArgumentError("GatherWords: more than 2^31-1 words");
  MPI_Request req;
  KOLO_MPI_CALL(MPI_Igather(mine, static_cast<int>(count), MPI_UINT64_T, all,
                            static_cast<int>(count), MPI_UINT64_T, root, comm_, &req));
  return WaitPolled(&req);
}

}  // namespace kolo
