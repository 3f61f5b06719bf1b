#include "collectives/host/tree_pipeline.h"

#include <cstring>
#include <deque>
#include <memory>
#include <string>

#include "collectives/reduce.h"

namespace kolo {
namespace {

// Sends in flight, at most kWindow: enough to keep the pipeline full without holding one
// request per segment of a gigabyte message.
class SendWindow {
 public:
  static constexpr size_t kWindow = 8;
  Status Add(StatusOr<std::unique_ptr<P2PBatch>> batch) {
    if (!batch.ok()) return batch.status();
    q_.push_back(std::move(batch).value());
    while (q_.size() > kWindow) KOLO_RETURN_IF_ERROR(Pop());
    return Status::OK();
  }
  Status Drain() {
    while (!q_.empty()) KOLO_RETURN_IF_ERROR(Pop());
    return Status::OK();
  }

 private:
  Status Pop() {
    Status s = q_.front()->Wait();
    q_.pop_front();
    return s;
  }
  std::deque<std::unique_ptr<P2PBatch>> q_;
};

std::string Where(const char* name, const char* phase, size_t i, size_t n) {
  return std::string(name) + " " + phase + " piece " + std::to_string(i + 1) + "/" +
         std::to_string(n);
}

}  // namespace

void AppendSegments(size_t offset, size_t count, size_t segment_elems, int tree,
                    std::vector<TreePiece>* pieces) {
  if (segment_elems == 0) segment_elems = 1;
  for (size_t done = 0; done < count; done += segment_elems) {
    pieces->push_back({offset + done, std::min(segment_elems, count - done), tree});
  }
}

Status TreePipeline::Run(Communicator& comm, const AllreduceArgs& args,
                         const std::vector<TreeNode>& trees, const std::vector<TreePiece>& pieces,
                         int tag_base, const char* name) {
  const size_t esize = DataTypeSize(args.dtype);
  const char* send = static_cast<const char*>(args.send);
  char* recv = static_cast<char*>(args.recv);
  const bool in_place = args.send == args.recv;
  const size_t n = pieces.size();

  size_t max_piece = 0, max_children = 0;
  for (const TreePiece& p : pieces) max_piece = std::max(max_piece, p.count * esize);
  for (const TreeNode& t : trees) max_children = std::max(max_children, t.children.size());
  const size_t child_bytes = max_piece, slot_bytes = max_children * max_piece;
  if (scratch_.size() < 2 * slot_bytes) scratch_.resize(2 * slot_bytes);
  auto child_buf = [&](size_t i, size_t c) {
    return scratch_.data() + (i % 2) * slot_bytes + c * child_bytes;
  };

  // Reduce: children's pieces into scratch, reduced into recv, sent up.
  std::vector<std::unique_ptr<P2PBatch>> from_children[2];
  auto post_reduce = [&](size_t i) -> Status {
    const TreePiece& pc = pieces[i];
    const TreeNode& node = trees[pc.tree];
    auto& slot = from_children[i % 2];
    slot.clear();
    for (size_t c = 0; c < node.children.size(); ++c) {
      KOLO_ASSIGN_OR_RETURN(
          auto b, comm.Start({P2POp::Recv(child_buf(i, c), pc.count * esize, node.children[c],
                                          tag_base + pc.tree)}));
      slot.push_back(std::move(b));
    }
    return Status::OK();
  };
  SendWindow sends;
  if (n > 0) KOLO_RETURN_IF_ERROR(post_reduce(0).AddContext(Where(name, "reduce", 0, n)));
  for (size_t i = 0; i < n; ++i) {
    const TreePiece& pc = pieces[i];
    const TreeNode& node = trees[pc.tree];
    const size_t bytes = pc.count * esize;
    if (i + 1 < n) {
      KOLO_RETURN_IF_ERROR(post_reduce(i + 1).AddContext(Where(name, "reduce", i + 1, n)));
    }
    const char* own = send + pc.offset * esize;
    char* acc = recv + pc.offset * esize;
    const int tag = tag_base + pc.tree;
    if (node.children.empty() && node.parent >= 0) {  // a leaf sends its own data as it is
      KOLO_RETURN_IF_ERROR(sends.Add(comm.Start({P2POp::Send(own, bytes, node.parent, tag)}))
                               .AddContext(Where(name, "reduce", i, n)));
      continue;
    }
    if (!in_place && node.children.empty()) std::memcpy(acc, own, bytes);
    for (size_t c = 0; c < node.children.size(); ++c) {
      KOLO_RETURN_IF_ERROR(from_children[i % 2][c]->Wait().AddContext(
          Where(name, "reduce", i, n) + " from rank " + std::to_string(node.children[c])));
      // The first child's piece meets the own data as it is read (no copy of it first).
      KOLO_RETURN_IF_ERROR(
          ReducePair(acc, c == 0 ? own : acc, child_buf(i, c), pc.count, args.dtype, args.op));
    }
    if (node.parent >= 0) {
      KOLO_RETURN_IF_ERROR(sends.Add(comm.Start({P2POp::Send(acc, bytes, node.parent, tag)}))
                               .AddContext(Where(name, "reduce", i, n)));
    }
  }
  // Pieces sent up are received into below: their sends must be complete first.
  KOLO_RETURN_IF_ERROR(sends.Drain().AddContext(std::string(name) + " reduce"));

  // Broadcast: each piece received from the parent straight into recv, forwarded to children.
  std::unique_ptr<P2PBatch> from_parent[2];
  auto post_bcast = [&](size_t i) -> Status {
    const TreePiece& pc = pieces[i];
    const TreeNode& node = trees[pc.tree];
    from_parent[i % 2].reset();
    if (node.parent < 0) return Status::OK();
    KOLO_ASSIGN_OR_RETURN(from_parent[i % 2],
                          comm.Start({P2POp::Recv(recv + pc.offset * esize, pc.count * esize,
                                                  node.parent, tag_base + 2 + pc.tree)}));
    return Status::OK();
  };
  if (n > 0) KOLO_RETURN_IF_ERROR(post_bcast(0).AddContext(Where(name, "broadcast", 0, n)));
  for (size_t i = 0; i < n; ++i) {
    const TreePiece& pc = pieces[i];
    const TreeNode& node = trees[pc.tree];
    if (i + 1 < n) {
      KOLO_RETURN_IF_ERROR(post_bcast(i + 1).AddContext(Where(name, "broadcast", i + 1, n)));
    }
    if (from_parent[i % 2]) {
      KOLO_RETURN_IF_ERROR(from_parent[i % 2]->Wait().AddContext(
          Where(name, "broadcast", i, n) + " from rank " + std::to_string(node.parent)));
    }
    const char* piece = recv + pc.offset * esize;
    for (int child : node.children) {
      KOLO_RETURN_IF_ERROR(sends
                               .Add(comm.Start({P2POp::Send(piece, pc.count * esize, child,
                                                            tag_base + 2 + pc.tree)}))
                               .AddContext(Where(name, "broadcast", i, n)));
    }
  }
  return sends.Drain().AddContext(std::string(name) + " broadcast");
}

}  // namespace kolo
