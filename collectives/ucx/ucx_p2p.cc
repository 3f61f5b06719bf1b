// Non-blocking point-to-point over UCP tags (Communicator::Start and the control plane).
//
// A transfer is one ucp_tag_send_nbx matched by one receive: ucp_tag_recv_nbx into the caller's
// buffer, or, for a receive whose length only the sender knows (the control plane's byte
// strings, Op::sized), a probe for the message (ucp_tag_probe_nb) that sizes the string and
// receives it (ucp_tag_msg_recv_nbx): one message, not a length and then the bytes.
#include <sched.h>

#include <chrono>
#include <cstring>

#include "base/online_cores.h"
#include "collectives/ucx/ucx_communicator.h"

namespace kolo {

namespace {

// Idle polls of a wait before it starts yielding the core (UcxBatch::Wait): 64 where every rank
// of the host has a core, 2 where they outnumber the cores (a spinning rank then holds the core
// its peer needs to answer; the shared-memory barrier measured 15.8 us with 64 polls against
// 5.2 us with 2 at 4 ranks on 2 cores, collectives/host/shm_node.cc).
uint64_t SpinPolls(const UcxWorld& world) { return OnlineCores() >= world.local_size() ? 64 : 2; }

}  // namespace

class UcxBatch : public P2PBatch {
 public:
  explicit UcxBatch(UcxCommunicator* comm) : comm_(comm) {}
  ~UcxBatch() override {
    // The contract: a batch destroyed without Wait waits (its wait still ends on a dead peer).
    if (!pending_.empty()) (void)Wait();
  }

  Status Post(const UcxCommunicator::Op& op) {
    Pending p;
    p.op = op;
    if (op.kind == P2POp::Kind::kRecv && op.sized != nullptr) {
      pending_.push_back(p);  // no request until its message is there (Probe)
      return Status::OK();
    }
    UcxWorld& world = comm_->world();
    ucp_request_param_t param = HostMemory();
    ucs_status_ptr_t req;
    if (op.kind == P2POp::Kind::kRecv) {
      // Always a request, even when the message already arrived: its length is then read with
      // ucp_tag_recv_request_test like any other (UCX 1.13 left recv_info unset on immediate
      // completion here, measured).
      param.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
      req = ucp_tag_recv_nbx(world.worker(), op.buffer, op.bytes, ReceiveTag(op), ~ucp_tag_t{0},
                             &param);
    } else {
      req = ucp_tag_send_nbx(world.endpoint(comm_->world_ranks_[op.peer]), op.buffer, op.bytes,
                             comm_->Tag(comm_->rank_, op.tag, op.control), &param);
    }
    if (UCS_PTR_IS_ERR(req)) {
      return UcxError(UCS_PTR_STATUS(req), Call(op), op.peer).AddContext(Describe(op));
    }
    if (req == nullptr) return Status::OK();  // a send, done at once
    p.request = req;
    pending_.push_back(p);
    return Status::OK();
  }

  Status Wait() override {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    auto next_check = start + std::chrono::seconds(1);
    UcxWorld& world = comm_->world();
    const uint64_t spin_polls = SpinPolls(world);
    for (uint64_t polls = 0; !pending_.empty(); ++polls) {
      // Progress before every look, the first too: a wait that found its receives complete
      // without one and returned let a rank exit with its own last message not yet sent
      // (measured in mpi.ucx_fault). Spinning first (SpinPolls), as MPI's waits do: yielding
      // from the first idle poll on made a 2-rank exchange of 8 bytes 0.3-0.5 us slower than
      // over MPI, each sched_yield a system call while the peer's message is already on its
      // way; after that an idle poll gives the core to whoever needs it (ranks may outnumber
      // cores: busy polling made one ring step of 4 ranks on 2 cores 2.7 ms).
      if (!world.Progress() && polls >= spin_polls) sched_yield();
      for (size_t i = 0; i < pending_.size();) {
        Pending& p = pending_[i];
        if (p.request == nullptr) {
          Status probed = Probe(p);
          if (!probed.ok()) return Fail(std::move(probed));
          if (p.request == nullptr) {
            ++i;
            continue;
          }
        }
        ucs_status_t st = p.op.kind == P2POp::Kind::kRecv
                              ? ucp_tag_recv_request_test(p.request, &p.info)
                              : ucp_request_check_status(p.request);
        if (st == UCS_INPROGRESS) {
          ++i;
          continue;
        }
        ucp_request_free(p.request);
        p.request = nullptr;
        Status s = st == UCS_OK ? CheckReceived(p)
                                : UcxError(st, Call(p.op), p.op.peer).AddContext(Describe(p.op));
        pending_[i] = pending_.back();
        pending_.pop_back();
        if (!s.ok()) return Fail(std::move(s));
      }
      if (pending_.empty()) break;
      if ((polls & 255) != 0) continue;
      const auto now = Clock::now();
      if (now < next_check) continue;
      next_check = now + std::chrono::seconds(1);
      // UCX reports remote peers' deaths on their endpoints (PEER mode) but never completes
      // the receives posted to them; same-host ones only the liveness check sees.
      for (const Pending& p : pending_) {
        Status s = world.PeerStatus(comm_->world_ranks_[p.op.peer]);
        if (!s.ok()) return Fail(std::move(s.AddContext(Describe(p.op))));
      }
      Status s = comm_->CheckLiveness();
      if (s.ok()) s = comm_->CheckProgress(start, Waiting());
      if (!s.ok()) return Fail(std::move(s));
    }
    // Acknowledgements this rank owes its rendezvous senders go out now, not at its next call.
    world.Drain();
    return Status::OK();
  }

  // Ends the batch after an error: receives are cancelled (UCX would otherwise write into
  // buffers the caller frees), sends released (UCX completes or drops them on its own). A peer
  // that is gone or stalled marks the world broken, so its teardown neither flushes to nor
  // waits for it; a local error (a size mismatch) leaves the world usable.
  Status Fail(Status why) {
    UcxWorld& world = comm_->world();
    if (why.code() == StatusCode::kUnavailable || why.code() == StatusCode::kDeadlineExceeded) {
      world.MarkBroken();
    }
    for (Pending& p : pending_) {
      if (p.request != nullptr && p.op.kind == P2POp::Kind::kRecv) {
        ucp_request_cancel(world.worker(), p.request);
      }
    }
    // A cancelled receive completes (UCS_ERR_CANCELED) within a few progress calls unless its
    // data is already arriving; a bounded wait keeps a dead peer from hanging us here.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    for (Pending& p : pending_) {
      if (p.request == nullptr) continue;  // a sized receive whose message never came
      while (p.op.kind == P2POp::Kind::kRecv &&
             ucp_request_check_status(p.request) == UCS_INPROGRESS &&
             std::chrono::steady_clock::now() < deadline) {
        if (!world.Progress()) sched_yield();
      }
      ucp_request_free(p.request);
    }
    pending_.clear();
    return why;
  }

 private:
  struct Pending {
    UcxCommunicator::Op op;
    void* request = nullptr;  // null only for a sized receive not yet probed
    ucp_tag_recv_info_t info{};
  };

  static ucp_request_param_t HostMemory() {
    ucp_request_param_t param;
    std::memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    param.memory_type = UCS_MEMORY_TYPE_HOST;
    return param;
  }

  // The tag a receive of `op` matches: the message its peer sent with op's tag.
  uint64_t ReceiveTag(const UcxCommunicator::Op& op) const {
    return comm_->Tag(op.peer, op.tag, op.control);
  }

  // A sized receive: once its message is there, the string takes its length and the receive
  // becomes an ordinary one of that many bytes.
  Status Probe(Pending& p) {
    UcxWorld& world = comm_->world();
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h message =
        ucp_tag_probe_nb(world.worker(), ReceiveTag(p.op), ~ucp_tag_t{0}, /*remove=*/1, &info);
    if (message == nullptr) return Status::OK();
    p.op.sized->resize(info.length);
    p.op.buffer = p.op.sized->data();
    p.op.bytes = info.length;
    ucp_request_param_t param = HostMemory();
    param.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    ucs_status_ptr_t req =
        ucp_tag_msg_recv_nbx(world.worker(), p.op.buffer, p.op.bytes, message, &param);
    if (UCS_PTR_IS_ERR(req)) {
      return UcxError(UCS_PTR_STATUS(req), "ucp_tag_msg_recv_nbx", p.op.peer)
          .AddContext(Describe(p.op));
    }
    p.request = req;
    return Status::OK();
  }

  static const char* Call(const UcxCommunicator::Op& op) {
    return op.kind == P2POp::Kind::kRecv ? "ucp_tag_recv_nbx" : "ucp_tag_send_nbx";
  }
  static std::string Describe(const UcxCommunicator::Op& op) {
    return std::string("rank ") + std::to_string(op.peer) +
           (op.kind == P2POp::Kind::kRecv ? " (receive" : " (send") +
           (op.control ? ", control tag " : ", tag ") + std::to_string(op.tag) + ", " +
           (op.sized != nullptr && op.buffer == nullptr ? std::string("any length")
                                                        : std::to_string(op.bytes) + " bytes") +
           ")";
  }

  Status CheckReceived(const Pending& p) const {
    if (p.op.kind != P2POp::Kind::kRecv || p.info.length == p.op.bytes) return Status::OK();
    return InternalError("UCX receive from " + Describe(p.op) + " got " +
                         std::to_string(p.info.length) + " bytes");
  }

  // "rank 1 (receive, tag 7), rank 2 (send, tag 7)": what the wait still waits for.
  std::string Waiting() const {
    std::string out;
    for (size_t i = 0; i < pending_.size(); ++i) {
      if (i == 4) return out + ", ...";
      out += (i ? ", " : "") + Describe(pending_[i].op);
    }
    return out;
  }

  UcxCommunicator* comm_;
  std::vector<Pending> pending_;
};

StatusOr<std::unique_ptr<P2PBatch>> UcxCommunicator::Post(const std::vector<Op>& ops) {
  auto batch = std::make_unique<UcxBatch>(this);
  for (int pass = 0; pass < 2; ++pass) {
    const P2POp::Kind kind = pass == 0 ? P2POp::Kind::kRecv : P2POp::Kind::kSend;
    for (const Op& op : ops) {
      if (op.kind != kind) continue;
      if (op.peer < 0 || op.peer >= Size()) {
        return InvalidArgumentError("UCX point-to-point: peer " + std::to_string(op.peer) +
                                    " is not a rank of " + std::to_string(Size()));
      }
      Status posted = batch->Post(op);
      // What was posted already must not be waited for: its peer may never match it.
      if (!posted.ok()) return batch->Fail(std::move(posted));
    }
  }
  return std::unique_ptr<P2PBatch>(std::move(batch));
}

Status UcxCommunicator::Run(const std::vector<Op>& ops) {
  KOLO_ASSIGN_OR_RETURN(std::unique_ptr<P2PBatch> batch, Post(ops));
  return batch->Wait();
}

StatusOr<std::unique_ptr<P2PBatch>> UcxCommunicator::Start(const std::vector<P2POp>& ops) {
  std::vector<Op> posted;
  posted.reserve(ops.size());
  for (const P2POp& op : ops) {
    if (op.bytes == 0) continue;
    posted.push_back({op.kind, op.buffer, op.bytes, op.peer, op.tag, false});
  }
  return Post(posted);
}

}  // namespace kolo
