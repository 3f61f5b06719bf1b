#include "collectives/loopback/loopback_communicator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "collectives/reduce.h"

namespace kolo {

LoopbackWorld::LoopbackWorld(int size, std::chrono::milliseconds deadline)
    : size_(size), deadline_(deadline), posts_(size, nullptr) {}

Status LoopbackWorld::Arrive(int rank, const char* what) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!abort_reason_.empty()) return UnavailableError(abort_reason_);
  const uint64_t gen = generation_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return Status::OK();
  }
  const bool done = cv_.wait_for(lock, deadline_, [&] {
    return generation_ != gen || !abort_reason_.empty();
  });
  if (!abort_reason_.empty()) return UnavailableError(abort_reason_);
  if (!done) {
    return DeadlineExceededError("loopback rank " + std::to_string(rank) + "/" +
                                 std::to_string(size_) + " still blocked in " + what +
                                 " after " + std::to_string(deadline_.count()) + " ms");
  }
  return Status::OK();
}

Status LoopbackWorld::Exchange(int rank, const void* mine,
                               const std::function<void(const std::vector<const void*>&)>& consume,
                               const char* what) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    posts_[rank] = mine;
  }
  KOLO_RETURN_IF_ERROR(Arrive(rank, what));
  std::vector<const void*> posts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    posts = posts_;
  }
  consume(posts);
  return Arrive(rank, what);
}

void LoopbackWorld::Abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  abort_reason_ = why.empty() ? "loopback world aborted" : why;
  cv_.notify_all();
}

void LoopbackWorld::Post(int src, int dst, int tag, std::string payload) {
  std::lock_guard<std::mutex> lock(mu_);
  mail_[{src, dst, tag}].push_back(std::move(payload));
  cv_.notify_all();
}

Status LoopbackWorld::Take(int src, int dst, int tag, std::string* payload, int rank) {
  std::unique_lock<std::mutex> lock(mu_);
  auto key = std::make_tuple(src, dst, tag);
  const bool ok = cv_.wait_for(lock, deadline_, [&] {
    auto it = mail_.find(key);
    return (it != mail_.end() && !it->second.empty()) || !abort_reason_.empty();
  });
  if (!abort_reason_.empty()) return UnavailableError(abort_reason_);
  if (!ok) {
    return DeadlineExceededError("loopback rank " + std::to_string(rank) +
                                 " still blocked in SendRecv(from=" + std::to_string(src) +
                                 ", tag=" + std::to_string(tag) + ")");
  }
  auto& q = mail_[key];
  *payload = std::move(q.front());
  q.pop_front();
  return Status::OK();
}

Status LoopbackCommunicator::SendRecv(const void* send, size_t send_bytes, int dst, void* recv,
                                      size_t recv_bytes, int src, int tag) {
  if (send_bytes) {
    world_->Post(rank_, dst, tag, std::string(static_cast<const char*>(send), send_bytes));
  }
  if (recv_bytes) {
    std::string got;
    KOLO_RETURN_IF_ERROR(world_->Take(src, rank_, tag, &got, rank_));
    if (got.size() != recv_bytes) {
      return InternalError("loopback SendRecv: expected " + std::to_string(recv_bytes) +
                           " bytes from rank " + std::to_string(src) + ", got " +
                           std::to_string(got.size()));
    }
    std::memcpy(recv, got.data(), recv_bytes);
  }
  return Status::OK();
}

Status LoopbackCommunicator::Allreduce(const void* send, void* recv, size_t count, DataType dtype,
                                       ReduceOp op) {
  const size_t bytes = count * DataTypeSize(dtype);
  // Computed into a private buffer first: with send == recv on some rank, writing recv while
  // a peer still reads it would race.
  std::string result(bytes, '\0');
  Status reduce_status;
  KOLO_RETURN_IF_ERROR(world_->Exchange(
      rank_, send,
      [&](const std::vector<const void*>& posts) {
        if (bytes) std::memcpy(result.data(), posts[0], bytes);
        for (size_t r = 1; r < posts.size() && reduce_status.ok(); ++r) {
          reduce_status = ReduceInto(result.data(), posts[r], count, dtype, op);
        }
      },
      "Allreduce"));
  KOLO_RETURN_IF_ERROR(reduce_status);
  if (bytes) std::memcpy(recv, result.data(), bytes);
  return Status::OK();
}

Status LoopbackCommunicator::Allgatherv(const void* send, size_t send_bytes, void* recv,
                                        const std::vector<size_t>& recv_bytes) {
  if (recv_bytes.size() != static_cast<size_t>(Size()) || recv_bytes[rank_] != send_bytes) {
    return InvalidArgumentError("loopback Allgatherv: counts do not match");
  }
  return world_->Exchange(
      rank_, send,
      [&](const std::vector<const void*>& posts) {
        size_t off = 0;
        for (size_t r = 0; r < posts.size(); ++r) {
          if (recv_bytes[r]) std::memcpy(static_cast<char*>(recv) + off, posts[r], recv_bytes[r]);
          off += recv_bytes[r];
        }
      },
      "Allgatherv");
}

Status LoopbackCommunicator::ReduceScatter(const void* send, void* recv,
                                           const std::vector<size_t>& counts, DataType dtype,
                                           ReduceOp op) {
  if (counts.size() != static_cast<size_t>(Size())) {
    return InvalidArgumentError("loopback ReduceScatter: counts do not match");
  }
  const size_t esize = DataTypeSize(dtype);
  size_t offset = 0;
  for (int r = 0; r < rank_; ++r) offset += counts[r];
  const size_t mine = counts[rank_];
  // Rank r reduces only its own block, from every rank's contribution, in rank order.
  std::string result(mine * esize, '\0');
  Status reduce_status;
  KOLO_RETURN_IF_ERROR(world_->Exchange(
      rank_, send,
      [&](const std::vector<const void*>& posts) {
        if (!mine) return;
        std::memcpy(result.data(), static_cast<const char*>(posts[0]) + offset * esize,
                    mine * esize);
        for (size_t r = 1; r < posts.size() && reduce_status.ok(); ++r) {
          reduce_status = ReduceInto(result.data(),
                                     static_cast<const char*>(posts[r]) + offset * esize, mine,
                                     dtype, op);
        }
      },
      "ReduceScatter"));
  KOLO_RETURN_IF_ERROR(reduce_status);
  if (mine) std::memcpy(recv, result.data(), mine * esize);
  return Status::OK();
}

Status LoopbackCommunicator::Alltoallv(const void* send, const std::vector<size_t>& send_bytes,
                                       void* recv, const std::vector<size_t>& recv_bytes) {
  const size_t n = static_cast<size_t>(Size());
  if (send_bytes.size() != n || recv_bytes.size() != n) {
    return InvalidArgumentError("loopback Alltoallv: counts do not match");
  }
  struct Post {
    const char* data;
    const std::vector<size_t>* bytes;
  };
  const Post mine{static_cast<const char*>(send), &send_bytes};
  Status status;
  KOLO_RETURN_IF_ERROR(world_->Exchange(
      rank_, &mine,
      [&](const std::vector<const void*>& posts) {
        size_t out = 0;
        for (size_t q = 0; q < n && status.ok(); ++q) {
          const Post& p = *static_cast<const Post*>(posts[q]);
          size_t off = 0;
          for (int r = 0; r < rank_; ++r) off += (*p.bytes)[r];
          if ((*p.bytes)[rank_] != recv_bytes[q]) {
            status = InternalError("loopback Alltoallv: rank " + std::to_string(q) + " sends " +
                                   std::to_string((*p.bytes)[rank_]) + " bytes, rank " +
                                   std::to_string(rank_) + " expects " +
                                   std::to_string(recv_bytes[q]));
            break;
          }
          if (recv_bytes[q]) std::memcpy(static_cast<char*>(recv) + out, p.data + off, recv_bytes[q]);
          out += recv_bytes[q];
        }
      },
      "Alltoallv"));
  return status;
}

Status LoopbackCommunicator::Broadcast(void* buffer, size_t bytes, int root) {
  std::string copy;
  KOLO_RETURN_IF_ERROR(world_->Exchange(
      rank_, buffer,
      [&](const std::vector<const void*>& posts) {
        if (rank_ != root) copy.assign(static_cast<const char*>(posts[root]), bytes);
      },
      "Broadcast"));
  if (rank_ != root && bytes) std::memcpy(buffer, copy.data(), bytes);
  return Status::OK();
}

Status LoopbackCommunicator::Barrier() {
  return world_->Exchange(rank_, nullptr, [](const std::vector<const void*>&) {}, "Barrier");
}

Status LoopbackCommunicator::GatherBytes(const std::string& mine, std::vector<std::string>* all,
                                         int root) {
  return world_->Exchange(
      rank_, &mine,
      [&](const std::vector<const void*>& posts) {
        if (rank_ != root) return;
        all->clear();
        for (const void* p : posts) all->push_back(*static_cast<const std::string*>(p));
      },
      "GatherBytes");
}

Status LoopbackCommunicator::BroadcastBytes(std::string* bytes, int root) {
  std::string copy;
  KOLO_RETURN_IF_ERROR(world_->Exchange(
      rank_, bytes,
      [&](const std::vector<const void*>& posts) {
        if (rank_ != root) copy = *static_cast<const std::string*>(posts[root]);
      },
      "BroadcastBytes"));
  if (rank_ != root) *bytes = std::move(copy);
  return Status::OK();
}

Status LoopbackCommunicator::AndBits(uint64_t* words, size_t count) {
  std::vector<uint64_t> result(words, words + count);
  KOLO_RETURN_IF_ERROR(world_->Exchange(
      rank_, words,
      [&](const std::vector<const void*>& posts) {
        for (const void* p : posts) {
          const uint64_t* theirs = static_cast<const uint64_t*>(p);
          for (size_t i = 0; i < count; ++i) result[i] &= theirs[i];
        }
      },
      "AndBits"));
  std::copy(result.begin(), result.end(), words);
  return Status::OK();
}

namespace {

class LoopbackBatch : public P2PBatch {
 public:
  LoopbackBatch(LoopbackWorld* world, int rank, std::vector<P2POp> recvs)
      : world_(world), rank_(rank), recvs_(std::move(recvs)) {}
  // Not waited: the receives are dropped (their messages stay in the mailbox, as unmatched
  // MPI messages would; the communicator is not used after an error).
  Status Wait() override {
    for (const P2POp& op : recvs_) {
      std::string got;
      KOLO_RETURN_IF_ERROR(world_->Take(op.peer, rank_, op.tag, &got, rank_));
      if (got.size() != op.bytes) {
        return InternalError("loopback receive from rank " + std::to_string(op.peer) + " tag " +
                             std::to_string(op.tag) + ": expected " + std::to_string(op.bytes) +
                             " bytes, got " + std::to_string(got.size()));
      }
      std::memcpy(op.buffer, got.data(), op.bytes);
    }
    recvs_.clear();
    return Status::OK();
  }

 private:
  LoopbackWorld* world_;
  int rank_;
  std::vector<P2POp> recvs_;
};

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using OwnedRegion = std::unique_ptr<void, AlignedFree>;

class LoopbackSegment : public SharedSegment {
 public:
  LoopbackSegment(std::vector<std::shared_ptr<OwnedRegion>> regions, size_t bytes)
      : regions_(std::move(regions)), bytes_(bytes) {}
  void* Region(int rank) override { return regions_.at(rank)->get(); }
  size_t RegionBytes() const override { return bytes_; }

 private:
  std::vector<std::shared_ptr<OwnedRegion>> regions_;
  size_t bytes_;
};

}  // namespace

StatusOr<std::unique_ptr<P2PBatch>> LoopbackCommunicator::Start(const std::vector<P2POp>& ops) {
  std::vector<P2POp> recvs;
  for (const P2POp& op : ops) {
    if (op.peer < 0 || op.peer >= Size()) {
      return InvalidArgumentError("loopback point-to-point: peer " + std::to_string(op.peer) +
                                  " is not a rank of " + std::to_string(Size()));
    }
    if (op.bytes == 0) continue;
    if (op.kind == P2POp::Kind::kRecv) {
      recvs.push_back(op);
    } else {
      world_->Post(rank_, op.peer, op.tag,
                   std::string(static_cast<const char*>(op.buffer), op.bytes));
    }
  }
  return std::unique_ptr<P2PBatch>(new LoopbackBatch(world_.get(), rank_, std::move(recvs)));
}

StatusOr<std::unique_ptr<SharedSegment>> LoopbackCommunicator::AllocateShared(
    size_t bytes_per_rank) {
  const size_t bytes = (std::max<size_t>(bytes_per_rank, 1) + 63) / 64 * 64;
  void* raw = std::aligned_alloc(64, bytes);
  if (!raw) {
    return ResourceExhaustedError("loopback shared segment: cannot allocate " +
                                  std::to_string(bytes) + " bytes");
  }
  std::memset(raw, 0, bytes);
  auto mine = std::make_shared<OwnedRegion>(raw);
  std::vector<std::shared_ptr<OwnedRegion>> all;
  KOLO_RETURN_IF_ERROR(world_->Exchange(
      rank_, &mine,
      [&](const std::vector<const void*>& posts) {
        for (const void* p : posts) all.push_back(*static_cast<const std::shared_ptr<OwnedRegion>*>(p));
      },
      "AllocateShared"));
  return std::unique_ptr<SharedSegment>(new LoopbackSegment(std::move(all), bytes_per_rank));
}

LoopbackNodeWorlds::LoopbackNodeWorlds(NodeMap map, std::chrono::milliseconds deadline)
    : map_(std::move(map)), deadline_(deadline) {}

std::shared_ptr<LoopbackWorld> LoopbackNodeWorlds::WorldFor(const std::string& key, int size) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& w = worlds_[key];
  if (!w) w = std::make_shared<LoopbackWorld>(size, deadline_);
  return w;
}

std::shared_ptr<NodeContext> LoopbackNodeWorlds::ContextFor(int rank) {
  auto ctx = std::make_shared<NodeContext>();
  ctx->map = map_;
  const int node = map_.node_of_rank.at(rank);
  const int local_rank = map_.local_rank_of.at(rank);
  ctx->local = std::make_unique<LoopbackCommunicator>(
      WorldFor("local" + std::to_string(node), map_.node_sizes[node]), local_rank);
  // Cross group of local rank k: the nodes that have a k-th rank, in node order.
  int cross_size = 0, cross_rank = 0;
  for (int n = 0; n < map_.nodes(); ++n) {
    if (map_.node_sizes[n] > local_rank) {
      if (n == node) cross_rank = cross_size;
      ++cross_size;
    }
  }
  ctx->cross = std::make_unique<LoopbackCommunicator>(
      WorldFor("cross" + std::to_string(local_rank), cross_size), cross_rank);
  ctx->shm_capable = true;
  return ctx;
}

}  // namespace kolo
