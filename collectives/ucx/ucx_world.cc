#include "collectives/ucx/ucx_world.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "base/host_name.h"
#include "collectives/ucx/ucx_defaults.h"

namespace kolo {

Status UcxError(ucs_status_t status, const std::string& call, int peer) {
  std::string where = peer >= 0 ? " to rank " + std::to_string(peer) : "";
  std::string text = call + where + " failed: " + ucs_status_string(status);
  // A lost connection is a peer that died: the runtime's "peer gone" code.
  // A shared-memory error is a same-host peer whose segment went with its process.
  if (status == UCS_ERR_CONNECTION_RESET || status == UCS_ERR_ENDPOINT_TIMEOUT ||
      status == UCS_ERR_UNREACHABLE || status == UCS_ERR_SHMEM_SEGMENT) {
    return UnavailableError(std::move(text));
  }
  return InternalError(std::move(text));
}

namespace {

// One rank's contribution to the exchange: [u32 host length][host][worker address].
std::string PackAddress(const std::string& host, const void* address, size_t length) {
  const uint32_t n = static_cast<uint32_t>(host.size());
  std::string out(reinterpret_cast<const char*>(&n), sizeof(n));
  out += host;
  out.append(static_cast<const char*>(address), length);
  return out;
}

bool UnpackAddress(const std::string& in, std::string* host, std::string* address) {
  uint32_t n = 0;
  if (in.size() < sizeof(n)) return false;
  std::memcpy(&n, in.data(), sizeof(n));
  if (in.size() < sizeof(n) + n) return false;
  *host = in.substr(sizeof(n), n);
  *address = in.substr(sizeof(n) + n);
  return !address->empty();
}

}  // namespace

UcxWorld::UcxWorld(int rank, int size, UcxAllgather allgather)
    : rank_(rank),
      size_(size),
      allgather_(std::move(allgather)),
      peers_(size),
      used_ids_(kMaxCommIds / 64, 0) {}

StatusOr<std::shared_ptr<UcxWorld>> UcxWorld::Create(int rank, int size, UcxAllgather allgather) {
  if (size < 1 || rank < 0 || rank >= size || size > (1 << 16)) {
    return InvalidArgumentError("UCX world: rank " + std::to_string(rank) + " of " +
                                std::to_string(size) + " (at most 65536 ranks)");
  }
  if (!allgather) return InvalidArgumentError("UCX world: no address exchange");
  std::shared_ptr<UcxWorld> world(new UcxWorld(rank, size, std::move(allgather)));
  KOLO_RETURN_IF_ERROR(world->Init().AddContext("UCX world rank " + std::to_string(rank) + "/" +
                                                std::to_string(size)));
  return world;
}

Status UcxWorld::OpenWorker(bool one_host, std::string* address_out) {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read("KOLO", nullptr, &config);
  if (st != UCS_OK) return UcxError(st, "ucp_config_read");
  // The transports and the protocol threshold, unless the user chose them (ucx_world.h says
  // why).
  const auto user_set = [](const char* name) {
    return std::getenv(("KOLO_UCX_" + std::string(name)).c_str()) != nullptr ||
           std::getenv(("UCX_" + std::string(name)).c_str()) != nullptr;
  };
  for (const UcxSetting& s : UcxDefaults(one_host, user_set)) {
    st = ucp_config_modify(config, s.name, s.value);
    if (st != UCS_OK) {
      ucp_config_release(config);
      return UcxError(st, std::string("ucp_config_modify(") + s.name + "=" + s.value + ")");
    }
  }
  ucp_params_t params;
  std::memset(&params, 0, sizeof(params));
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_TAG;
  params.name = "kolo";
  st = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (st != UCS_OK) return UcxError(st, "ucp_init");

  ucp_context_attr_t attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  st = ucp_context_query(context_, &attr);
  if (st != UCS_OK) return UcxError(st, "ucp_context_query");
  memory_types_ = attr.memory_types;

  ucp_worker_params_t wparams;
  std::memset(&wparams, 0, sizeof(wparams));
  wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wparams.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  st = ucp_worker_create(context_, &wparams, &worker_);
  if (st != UCS_OK) return UcxError(st, "ucp_worker_create");

  ucp_address_t* address = nullptr;
  size_t address_length = 0;
  st = ucp_worker_get_address(worker_, &address, &address_length);
  if (st != UCS_OK) return UcxError(st, "ucp_worker_get_address");
  *address_out = PackAddress(HostName(), address, address_length);
  ucp_worker_release_address(worker_, address);
  return Status::OK();
}

Status UcxWorld::Init() {
  const UcxAllgather allgather = std::move(allgather_);
  allgather_ = nullptr;  // what it holds (a bootstrap) is not kept alive for nothing
  // First the hosts, which decide the transports; then the addresses. A rank that cannot open
  // its worker still takes part (with an empty address), so every rank fails together.
  const std::string my_host = HostName();
  std::vector<std::string> hosts;
  KOLO_RETURN_IF_ERROR(allgather(my_host, &hosts).AddContext("UCX host exchange"));
  if (hosts.size() != static_cast<size_t>(size_)) {
    return InternalError("UCX host exchange returned " + std::to_string(hosts.size()) +
                         " names for " + std::to_string(size_) + " ranks");
  }
  const bool one_host =
      std::all_of(hosts.begin(), hosts.end(), [&](const std::string& h) { return h == my_host; });
  local_size_ = static_cast<int>(std::count(hosts.begin(), hosts.end(), my_host));
  std::string mine;
  const Status opened = OpenWorker(one_host, &mine);
  std::vector<std::string> all;
  KOLO_RETURN_IF_ERROR(allgather(opened.ok() ? mine : std::string(), &all)
                           .AddContext("UCX worker address exchange"));
  if (!opened.ok()) return opened;
  if (all.size() != static_cast<size_t>(size_)) {
    return InternalError("UCX worker address exchange returned " + std::to_string(all.size()) +
                         " addresses for " + std::to_string(size_) + " ranks");
  }
  for (int r = 0; r < size_; ++r) {
    if (all[r].empty()) {
      return UnavailableError("UCX: rank " + std::to_string(r) + " (" + hosts[r] +
                              ") could not open its UCX worker (its own error says why)");
    }
  }
  for (int r = 0; r < size_; ++r) {
    Peer& peer = peers_[r];
    std::string remote;
    if (!UnpackAddress(all[r], &peer.host, &remote)) {
      return InternalError("UCX worker address of rank " + std::to_string(r) + " is malformed (" +
                           std::to_string(all[r].size()) + " bytes)");
    }
    peer.world = this;
    peer.rank = r;
    ucp_ep_params_t ep_params;
    std::memset(&ep_params, 0, sizeof(ep_params));
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep_params.address = reinterpret_cast<const ucp_address_t*>(remote.data());
    if (peer.host == my_host) {
      ep_params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    } else {
      ep_params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
      ep_params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
      ep_params.err_handler.cb = &UcxWorld::OnEndpointError;
      ep_params.err_handler.arg = &peer;
    }
    const ucs_status_t st = ucp_ep_create(worker_, &ep_params, &peer.ep);
    if (st != UCS_OK) {
      peer.ep = nullptr;
      return UcxError(st, "ucp_ep_create (" + peer.host + ")", r);
    }
  }
  return Status::OK();
}

void UcxWorld::OnEndpointError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* peer = static_cast<Peer*>(arg);
  if (peer->error == UCS_OK) peer->error = status;
}

Status UcxWorld::PeerStatus(int world_rank) const {
  const ucs_status_t st = peers_[world_rank].error;
  if (st == UCS_OK) return Status::OK();
  return UnavailableError("UCX endpoint to rank " + std::to_string(world_rank) + " (" +
                          peers_[world_rank].host + ") failed: " + ucs_status_string(st));
}

void UcxWorld::CloseEndpoints() {
  // Flush mode lets what this rank sent (and the acknowledgements it owes) reach the peers
  // before the endpoint goes; force mode drops them, for a broken world or a failed endpoint,
  // where a flush could wait forever on a dead peer.
  std::vector<void*> closing;
  for (Peer& peer : peers_) {
    if (peer.ep == nullptr) continue;
    ucp_request_param_t param;
    std::memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = (broken_ || peer.error != UCS_OK) ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t req = ucp_ep_close_nbx(peer.ep, &param);
    if (UCS_PTR_IS_PTR(req)) closing.push_back(req);
    peer.ep = nullptr;
  }
  // Bounded: a peer that died without anyone noticing must not hang the teardown.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (void* req : closing) {
    while (ucp_request_check_status(req) == UCS_INPROGRESS &&
           std::chrono::steady_clock::now() < deadline) {
      if (!Progress()) sched_yield();
    }
    ucp_request_free(req);
  }
}

UcxWorld::~UcxWorld() {
  if (worker_ != nullptr) {
    CloseEndpoints();
    ucp_worker_destroy(worker_);
  }
  if (context_ != nullptr) ucp_cleanup(context_);
}

std::vector<uint64_t> UcxWorld::FreeIds() const {
  std::vector<uint64_t> free(used_ids_.size());
  for (size_t i = 0; i < free.size(); ++i) free[i] = ~used_ids_[i];
  return free;
}

void UcxWorld::TakeId(int id) { used_ids_[id / 64] |= uint64_t{1} << (id % 64); }
void UcxWorld::ReleaseId(int id) { used_ids_[id / 64] &= ~(uint64_t{1} << (id % 64)); }

}  // namespace kolo
