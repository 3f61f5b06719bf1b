#include "collectives/ucx/ucx_communicator.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace kolo {

StatusOr<std::unique_ptr<UcxCommunicator>> UcxCommunicator::Create(int rank, int size,
                                                                   UcxAllgather allgather) {
  KOLO_ASSIGN_OR_RETURN(std::shared_ptr<UcxWorld> world,
                        UcxWorld::Create(rank, size, std::move(allgather)));
  // The world communicator is id 0 on every rank: nothing needs agreeing yet.
  std::vector<int> ranks(size);
  std::iota(ranks.begin(), ranks.end(), 0);
  world->TakeId(0);
  return std::unique_ptr<UcxCommunicator>(new UcxCommunicator(std::move(world), 0, ranks));
}

UcxCommunicator::UcxCommunicator(std::shared_ptr<UcxWorld> world, int id,
                                 std::vector<int> world_ranks)
    : world_(std::move(world)), id_(id), world_ranks_(std::move(world_ranks)) {
  const auto me = std::find(world_ranks_.begin(), world_ranks_.end(), world_->rank());
  rank_ = static_cast<int>(me - world_ranks_.begin());
}

UcxCommunicator::~UcxCommunicator() {
  // The world communicator meets the other ranks before the world can go: a rank that closed
  // its endpoints and destroyed its worker while a peer still sent to it would fail the peer's
  // last operations. Bounded like any wait here (the liveness check); skipped once the world is
  // broken, since a dead rank would never arrive. Without the progress check: its owner (a
  // Runtime's progress watch) may already be gone.
  set_progress_check(nullptr);
  if (id_ == 0 && !world_->broken()) (void)Barrier();
  // The id is free again for this rank; the world (and its teardown) goes with the last
  // communicator that shares it.
  world_->ReleaseId(id_);
}

uint64_t UcxCommunicator::Tag(int sender, int tag, bool control) const {
  return (control ? uint64_t{1} << 63 : 0) | (static_cast<uint64_t>(id_) << 48) |
         (static_cast<uint64_t>(sender) << 32) | static_cast<uint32_t>(tag);
}

Status UcxCommunicator::CheckLiveness() {
  if (!liveness_check_) return Status::OK();
  Status s = liveness_check_();
  if (!s.ok()) world_->MarkBroken();
  return s;
}

StatusOr<std::unique_ptr<UcxCommunicator>> UcxCommunicator::CreateSub(
    const std::vector<int>& members) {
  std::vector<int> sorted = members;
  std::sort(sorted.begin(), sorted.end());
  if (!sorted.empty() &&
      (sorted.front() < 0 || sorted.back() >= Size() ||
       std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())) {
    return InvalidArgumentError("UCX sub-communicator: members must be distinct ranks of " +
                                std::to_string(Size()));
  }
  // Every rank of this communicator takes part, members or not, so all agree on one id: the
  // lowest id free on all of them.
  std::vector<uint64_t> free = world_->FreeIds();
  KOLO_RETURN_IF_ERROR(AndBits(free.data(), free.size()).AddContext("UCX sub-communicator id"));
  int id = -1;
  for (size_t w = 0; w < free.size() && id < 0; ++w) {
    if (free[w] != 0) id = static_cast<int>(w * 64) + __builtin_ctzll(free[w]);
  }
  if (id < 0) return ResourceExhaustedError("UCX sub-communicator: all 32768 ids in use");
  if (!std::binary_search(sorted.begin(), sorted.end(), rank_)) {
    return std::unique_ptr<UcxCommunicator>();
  }
  world_->TakeId(id);
  std::vector<int> world_ranks;
  world_ranks.reserve(members.size());
  for (int m : members) world_ranks.push_back(world_ranks_[m]);
  auto sub = std::unique_ptr<UcxCommunicator>(new UcxCommunicator(world_, id, world_ranks));
  sub->liveness_check_ = liveness_check_;
  return sub;
}

}  // namespace kolo
