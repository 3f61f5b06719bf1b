#include "runtime/world/env_bootstrap.h"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "base/host_name.h"
#include "base/logging.h"
#include "collectives/agree.h"
#include "runtime/peer_watch.h"
#include "runtime/world/tcp_rendezvous.h"
#include "runtime/world/ucx_bootstrap.h"

namespace kolo {
namespace {

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

// A whole number in [low, high] from variable `name`; -1 when unset and `optional`.
StatusOr<int> EnvInt(const char* name, int low, int high, bool optional = false) {
  const char* v = Env(name);
  if (v == nullptr) {
    if (optional) return -1;
    return InvalidArgumentError(std::string(name) + " is not set");
  }
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(v, &end, 10);
  if (errno != 0 || *end != '\0' || end == v || n < low || n > high) {
    return InvalidArgumentError(std::string(name) + "='" + v + "': expected a whole number in [" +
                                std::to_string(low) + ", " + std::to_string(high) + "]");
  }
  return static_cast<int>(n);
}

// What each rank tells the others at the start: its host, pid, and the launcher's LOCAL_RANK and
// LOCAL_WORLD_SIZE (-1 when unset), one per line.
struct Arrival {
  std::string host;
  int pid = 0;
  int local_rank = -1;
  int local_size = -1;
};

std::string Pack(const Arrival& a) {
  return a.host + "\n" + std::to_string(a.pid) + "\n" + std::to_string(a.local_rank) + "\n" +
         std::to_string(a.local_size);
}

bool Unpack(const std::string& s, Arrival* a) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t nl; (nl = s.find('\n', start)) != std::string::npos; start = nl + 1) {
    parts.push_back(s.substr(start, nl - start));
  }
  parts.push_back(s.substr(start));
  if (parts.size() != 4) return false;
  a->host = parts[0];
  a->pid = std::atoi(parts[1].c_str());
  a->local_rank = std::atoi(parts[2].c_str());
  a->local_size = std::atoi(parts[3].c_str());
  return true;
}

class RendezvousBootstrap : public Bootstrap {
 public:
  explicit RendezvousBootstrap(std::unique_ptr<TcpRendezvous> rendezvous, Arrival mine)
      : rendezvous_(std::move(rendezvous)), mine_(std::move(mine)) {}

  std::string_view Name() const override { return "env"; }

  // The layout and nodes only: the communicators are the UCX Bootstrap's over this one.
  StatusOr<Transports> Connect(const Config& config) override {
    const int rank = rendezvous_->rank(), size = rendezvous_->size();
    std::vector<std::string> all;
    KOLO_RETURN_IF_ERROR(rendezvous_->Allgather(Pack(mine_), &all).AddContext("kolo_init"));
    std::vector<Arrival> arrivals(static_cast<size_t>(size));
    std::vector<std::string> hosts;
    std::vector<int> host_of(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) {
      if (!Unpack(all[static_cast<size_t>(r)], &arrivals[static_cast<size_t>(r)])) {
        return DataLossError("kolo_init: rank " + std::to_string(r) +
                             "'s arrival is malformed (a different kolo version?)");
      }
      const std::string& host = arrivals[static_cast<size_t>(r)].host;
      size_t id = 0;
      while (id < hosts.size() && hosts[id] != host) ++id;
      if (id == hosts.size()) hosts.push_back(host);
      host_of[static_cast<size_t>(r)] = static_cast<int>(id);
    }
    const NodeMap by_host = NodeMap::FromNodeIds(host_of);
    // The launcher's local ranks against the hosts: a mismatch means the variables are wrong
    // (or two hosts share a name), which every rank sees alike, so all fail together.
    for (int r = 0; r < size; ++r) {
      const Arrival& a = arrivals[static_cast<size_t>(r)];
      const int local = by_host.local_rank_of[static_cast<size_t>(r)];
      const int local_size =
          by_host.node_sizes[static_cast<size_t>(by_host.node_of_rank[static_cast<size_t>(r)])];
      if ((a.local_rank >= 0 && a.local_rank != local) ||
          (a.local_size >= 0 && a.local_size != local_size)) {
        return InvalidArgumentError("kolo_init: rank " + std::to_string(r) +
                                    " has LOCAL_RANK=" + std::to_string(a.local_rank) +
                                    " LOCAL_WORLD_SIZE=" + std::to_string(a.local_size) +
                                    ", but by host name it is local rank " + std::to_string(local) +
                                    " of " + std::to_string(local_size) + " on " + a.host);
      }
    }
    const GatherAll gather_all = [this](const std::string& m, std::vector<std::string>* out) {
      return rendezvous_->Allgather(m, out);
    };
    KOLO_RETURN_IF_ERROR(AgreeOnString(gather_all, "KOLO_NODE_GROUPING", config.node_grouping)
                             .AddContext("kolo_init"));
    NodeMap nodes = by_host;
    if (!config.node_grouping.empty()) {
      KOLO_ASSIGN_OR_RETURN(nodes, NodeMap::Parse(config.node_grouping, size));
    }
    // The peer watch covers the ranks on this host (UCX never reports them dead).
    std::vector<LocalPeer> peers;
    for (int r = 0; r < size; ++r) {
      if (host_of[static_cast<size_t>(r)] == host_of[static_cast<size_t>(rank)]) {
        peers.push_back(LocalPeer{r, arrivals[static_cast<size_t>(r)].pid});
      }
    }
    WatchPeers(rank, size, mine_.host, peers);
    Transports t;
    t.layout = LayoutFromNodes(rank, nodes);
    t.nodes = nodes;
    return t;
  }

  int Size() const override { return rendezvous_->size(); }

  Status AllgatherBytes(const std::string& mine, std::vector<std::string>* all) override {
    return rendezvous_->Allgather(mine, all);
  }

  StatusOr<Transports> ConnectSubset(const std::vector<int>&, const Config&) override {
    return FailedPreconditionError("env bootstrap: process sets are made by the UCX bootstrap");
  }

  // No launcher library to shut down under kolo.
  Status CallBeforeExternalStop(void (*)()) override { return Status::OK(); }

 private:
  std::unique_ptr<TcpRendezvous> rendezvous_;
  Arrival mine_;
};

}  // namespace

bool EnvStartRequested() {
  for (const char* mpi : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (Env(mpi) != nullptr) return false;
  }
  return Env("RANK") != nullptr && Env("WORLD_SIZE") != nullptr && Env("MASTER_ADDR") != nullptr &&
         Env("MASTER_PORT") != nullptr;
}

StatusOr<std::unique_ptr<Bootstrap>> EnvBootstrap(double start_timeout_seconds) {
  if (!UcxTransportBuilt()) {
    return FailedPreconditionError(
        "kolo_init: started without MPI (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), which "
        "needs UCX, but this kolo was built without it (libucx-dev missing when configured)");
  }
  RendezvousOptions o;
  KOLO_ASSIGN_OR_RETURN(o.size, EnvInt("WORLD_SIZE", 1, 1 << 16));
  KOLO_ASSIGN_OR_RETURN(o.rank, EnvInt("RANK", 0, o.size - 1));
  KOLO_ASSIGN_OR_RETURN(const int master_port, EnvInt("MASTER_PORT", 1, 65535));
  KOLO_ASSIGN_OR_RETURN(const int kolo_port, EnvInt("KOLO_MASTER_PORT", 1, 65535, true));
  o.address = Env("MASTER_ADDR");
  const char* run_id = Env("TORCHELASTIC_RUN_ID");
  if (kolo_port > 0) {
    o.port = kolo_port;
  } else if (run_id != nullptr) {
    if (master_port == 65535) {
      return InvalidArgumentError(
          "kolo_init: MASTER_PORT=65535 under torchrun leaves no port "
          "for kolo's rendezvous (MASTER_PORT + 1): set KOLO_MASTER_PORT");
    }
    o.port = master_port + 1;
  } else {
    o.port = master_port;
  }
  const char* job = Env("KOLO_JOB_ID");
  if (job == nullptr) job = run_id;
  if (job == nullptr) job = Env("SLURM_JOB_ID");
  o.token = job != nullptr
                ? std::string(job)
                : o.address + ":" + std::to_string(master_port) + "/" + std::to_string(o.size);
  o.start_timeout_s = start_timeout_seconds > 0 ? start_timeout_seconds : 1e9;
  Arrival mine;
  mine.host = HostName();
  mine.pid = static_cast<int>(getpid());
  KOLO_ASSIGN_OR_RETURN(mine.local_rank, EnvInt("LOCAL_RANK", 0, 1 << 16, true));
  KOLO_ASSIGN_OR_RETURN(mine.local_size, EnvInt("LOCAL_WORLD_SIZE", 1, 1 << 16, true));
  std::unique_ptr<TcpRendezvous> rendezvous;
  if (o.rank == 0) {
    KOLO_ASSIGN_OR_RETURN(rendezvous, TcpRendezvous::Serve(o));
    KOLO_RETURN_IF_ERROR(rendezvous->AwaitRanks().AddContext("kolo_init"));
  } else {
    auto connected = TcpRendezvous::Connect(o);
    if (!connected.ok()) return Status(connected.status()).AddContext("kolo_init");
    rendezvous = std::move(*connected);
  }
  KOLO_LOG_DEBUG("init", "started without MPI: rank {} of {}, rendezvous {}:{}", o.rank, o.size,
                 o.address, o.port);
  return UcxBootstrapOver(
      std::unique_ptr<Bootstrap>(new RendezvousBootstrap(std::move(rendezvous), mine)));
}

}  // namespace kolo
