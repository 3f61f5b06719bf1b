// Non-blocking point-to-point over MPI (Communicator::Start).

#include <algorithm>
#include <climits>
#include <string>

#include "collectives/mpi/mpi_call.h"
#include "collectives/mpi/mpi_communicator.h"

namespace kolo {
namespace {

class MpiBatch : public P2PBatch {
 public:
  explicit MpiBatch(const MpiCommunicator* comm) : comm_(comm) {}
  ~MpiBatch() override {
    // Only reached on error paths, after which the communicator is not used again: cancel
    // what can be cancelled and let MPI drop the rest, rather than block on a failed peer.
    for (size_t i = 0; i < requests_.size(); ++i) {
      if (requests_[i] == MPI_REQUEST_NULL) continue;
      if (is_recv_[i]) MPI_Cancel(&requests_[i]);
      MPI_Request_free(&requests_[i]);
    }
  }

  Status Post(const P2POp& op) {
    char* data = static_cast<char*>(op.buffer);
    for (size_t done = 0; done < op.bytes;) {
      const int n = static_cast<int>(std::min<size_t>(INT_MAX, op.bytes - done));
      MPI_Request req;
      if (op.kind == P2POp::Kind::kRecv) {
        KOLO_MPI_CALL(MPI_Irecv(data + done, n, MPI_BYTE, op.peer, op.tag, comm_->comm(), &req));
      } else {
        KOLO_MPI_CALL(MPI_Isend(data + done, n, MPI_BYTE, op.peer, op.tag, comm_->comm(), &req));
      }
      requests_.push_back(req);
      is_recv_.push_back(op.kind == P2POp::Kind::kRecv);
      peers_.push_back(op.peer);
      tags_.push_back(op.tag);
      done += n;
    }
    return Status::OK();
  }

  Status Wait() override {
    KOLO_RETURN_IF_ERROR(comm_->WaitAll(static_cast<int>(requests_.size()), requests_.data(),
                                        [this] { return Pending(); }));
    requests_.clear();
    is_recv_.clear();
    peers_.clear();
    tags_.clear();
    return Status::OK();
  }

 private:
  // The transfers not yet complete, for the progress check: "rank 1 (receive, tag 7)".
  std::string Pending() const {
    std::string out;
    int shown = 0;
    for (size_t i = 0; i < requests_.size(); ++i) {
      int done = 0;
      if (requests_[i] == MPI_REQUEST_NULL ||
          (MPI_Request_get_status(requests_[i], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done)) {
        continue;
      }
      if (shown++ == 4) {
        out += ", ...";
        break;
      }
      out += (out.empty() ? "" : ", ") + std::string("rank ") + std::to_string(peers_[i]) +
             (is_recv_[i] ? " (receive, tag " : " (send, tag ") + std::to_string(tags_[i]) + ")";
    }
    return out.empty() ? "the transfers to complete" : out;
  }

  const MpiCommunicator* comm_;
  std::vector<MPI_Request> requests_;
  std::vector<bool> is_recv_;
  std::vector<int> peers_, tags_;  // per request, for Pending()
};

}  // namespace

StatusOr<std::unique_ptr<P2PBatch>> MpiCommunicator::Start(const std::vector<P2POp>& ops) {
  auto batch = std::make_unique<MpiBatch>(this);
  // Sends first, then receives. With Open MPI 4.1's TCP transport, a swap whose receive was
  // posted first ran up to 1.4x slower: 4 nodes of one rank on 1 Gbit/s links, 4 MiB,
  // recursive doubling 91-96 ms against 74-78 sent first, Rabenseifner 68-80 against 55-58
  // (the order libnbc's own schedules post in). On one host it made no difference that held
  // from run to run (docs/benchmarks.md, "Sends posted first").
  for (int pass = 0; pass < 2; ++pass) {
    const P2POp::Kind kind = pass == 0 ? P2POp::Kind::kSend : P2POp::Kind::kRecv;
    for (const P2POp& op : ops) {
      if (op.kind != kind || op.bytes == 0) continue;
      if (op.peer < 0 || op.peer >= size_) {
        return InvalidArgumentError("MPI point-to-point: peer " + std::to_string(op.peer) +
                                    " is not a rank of " + std::to_string(size_));
      }
      KOLO_RETURN_IF_ERROR(batch->Post(op));
    }
  }
  return std::unique_ptr<P2PBatch>(std::move(batch));
}

}  // namespace kolo
