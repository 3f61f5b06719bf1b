// The UCX settings kolo chooses for its own UCP context where the user has not chosen them
// (KOLO_UCX_<NAME> or UCX_<NAME> in the environment wins). collectives/ucx/ucx_world.h says
// why each is what it is:
//   TLS          one host: "posix,sysv,self" (shared memory only); across hosts: "^cma"
//                (everything but cross-memory attach)
//   RNDV_THRESH  across hosts only: "inf" (every message by eager sends, none by rendezvous)
#ifndef KOLO_COLLECTIVES_UCX_UCX_DEFAULTS_H_
#define KOLO_COLLECTIVES_UCX_UCX_DEFAULTS_H_

#include <functional>
#include <vector>

namespace kolo {

struct UcxSetting {
  const char* name;   // UCP's configuration name, without a prefix ("TLS")
  const char* value;  // for ucp_config_modify
};

// `user_set(name)`: whether the user set KOLO_UCX_<name> or UCX_<name>.
inline std::vector<UcxSetting> UcxDefaults(bool one_host,
                                           const std::function<bool(const char*)>& user_set) {
  std::vector<UcxSetting> out;
  if (!user_set("TLS")) out.push_back({"TLS", one_host ? "posix,sysv,self" : "^cma"});
  if (!one_host && !user_set("RNDV_THRESH")) out.push_back({"RNDV_THRESH", "inf"});
  return out;
}

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_UCX_UCX_DEFAULTS_H_
