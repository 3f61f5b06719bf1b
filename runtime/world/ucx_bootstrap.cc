#include "runtime/world/ucx_bootstrap.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "kolo/config.h"
#include "runtime/peer_watch.h"

#if KOLO_WITH_UCX
#include "collectives/ucx/ucx_communicator.h"
#include "collectives/ucx/ucx_node.h"
#endif

namespace kolo {

#if KOLO_WITH_UCX
namespace {

// The control (world) and data communicators over `world`, the node's sub-communicators on the
// data one; `layout` and `nodes` as the ranks of `world` see them.
StatusOr<Transports> UcxTransports(StatusOr<std::unique_ptr<UcxCommunicator>> world,
                                   const RankLayout& layout, const NodeMap& nodes) {
  if (!world.ok()) return world.status();
  (*world)->set_liveness_check(CheckPeers);  // the peer table covers every rank of the job
  std::vector<int> everyone(static_cast<size_t>(layout.size));
  for (int r = 0; r < layout.size; ++r) everyone[static_cast<size_t>(r)] = r;
  KOLO_ASSIGN_OR_RETURN(std::unique_ptr<UcxCommunicator> data, (*world)->CreateSub(everyone));
  KOLO_ASSIGN_OR_RETURN(std::shared_ptr<NodeContext> node, MakeUcxNodeContext(*data, nodes));
  data->set_node(std::move(node));
  Transports t;
  t.layout = layout;
  t.nodes = nodes;
  t.control = std::move(*world);
  t.data = std::move(data);
  return t;
}

class UcxBootstrap : public Bootstrap {
 public:
  explicit UcxBootstrap(std::unique_ptr<Bootstrap> out_of_band)
      : out_of_band_(std::move(out_of_band)) {}

  std::string_view Name() const override { return "ucx"; }

  StatusOr<Transports> Connect(const Config& config) override {
    KOLO_ASSIGN_OR_RETURN(Transports base, out_of_band_->Connect(config));
    rank_ = base.layout.rank;
    // The world calls it only while it is made (the hosts, then the worker addresses).
    std::shared_ptr<Bootstrap> oob = out_of_band_;
    UcxAllgather allgather = [oob](const std::string& mine, std::vector<std::string>* all) {
      return oob->AllgatherBytes(mine, all);
    };
    auto t = UcxTransports(
        UcxCommunicator::Create(base.layout.rank, base.layout.size, std::move(allgather)),
        base.layout, base.nodes);
    if (!t.ok()) return Status(t.status()).AddContext("KOLO_TRANSPORT=ucx");
    return t;
  }

  int Size() const override { return out_of_band_->Size(); }

  Status AllgatherBytes(const std::string& mine, std::vector<std::string>* all) override {
    return out_of_band_->AllgatherBytes(mine, all);
  }

  // A set's Runtime has a background thread of its own, so the set gets a UCX world of its own
  // (its own worker): the members' hosts and addresses travel in all-gathers over the whole
  // job, to which the other ranks contribute nothing. Nodes of a set are its members' hosts.
  StatusOr<Transports> ConnectSubset(const std::vector<int>& ranks, const Config&) override {
    const auto me = std::find(ranks.begin(), ranks.end(), rank_);
    if (me == ranks.end()) {
      for (int i = 0; i < UcxWorld::kExchanges; ++i) {
        std::vector<std::string> ignored;
        KOLO_RETURN_IF_ERROR(out_of_band_->AllgatherBytes(std::string(), &ignored));
      }
      return Transports{};
    }
    std::shared_ptr<Bootstrap> oob = out_of_band_;
    UcxAllgather allgather = [oob, ranks](const std::string& mine,
                                          std::vector<std::string>* all) {
      std::vector<std::string> job;
      KOLO_RETURN_IF_ERROR(oob->AllgatherBytes(mine, &job));
      all->clear();
      for (int r : ranks) all->push_back(job[static_cast<size_t>(r)]);
      return Status::OK();
    };
    const int rank = static_cast<int>(me - ranks.begin());
    const int size = static_cast<int>(ranks.size());
    auto world = UcxCommunicator::Create(rank, size, std::move(allgather));
    if (!world.ok()) return world.status();
    std::vector<std::string> hosts;
    std::vector<int> host_ids;
    for (int r = 0; r < size; ++r) {
      const std::string& host = (*world)->world().host(r);
      auto known = std::find(hosts.begin(), hosts.end(), host);
      host_ids.push_back(static_cast<int>(known - hosts.begin()));
      if (known == hosts.end()) hosts.push_back(host);
    }
    const NodeMap nodes = NodeMap::FromNodeIds(host_ids);
    return UcxTransports(std::move(world), LayoutFromNodes(rank, nodes), nodes);
  }

  Status CallBeforeExternalStop(void (*hook)()) override {
    return out_of_band_->CallBeforeExternalStop(hook);
  }

 private:
  std::shared_ptr<Bootstrap> out_of_band_;
  int rank_ = 0;  // in the job (after Connect)
};

}  // namespace

bool UcxTransportBuilt() { return true; }

std::unique_ptr<Bootstrap> UcxBootstrapOver(std::unique_ptr<Bootstrap> out_of_band) {
  return std::make_unique<UcxBootstrap>(std::move(out_of_band));
}

#else

bool UcxTransportBuilt() { return false; }

std::unique_ptr<Bootstrap> UcxBootstrapOver(std::unique_ptr<Bootstrap> out_of_band) {
  return out_of_band;
}

#endif

}  // namespace kolo
