#include "topology/nvml_links.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "topology/link_defaults.h"

namespace kolo {

namespace {

// The few NVML declarations used, as nvml.h has them (the CUDA toolkit here has no nvml.h;
// these signatures and the layout of nvmlPciInfo_t are NVML's stable ABI).
using NvmlReturn = int;  // NVML_SUCCESS == 0
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[32];
};
constexpr unsigned kNvmlMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS

struct Nvml {
  void* lib = nullptr;
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*by_bus_id)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*link_state)(NvmlDevice, unsigned, int*) = nullptr;
  NvmlReturn (*remote_pci)(NvmlDevice, unsigned, NvmlPciInfo*) = nullptr;

  bool Open() {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return false;
    init = reinterpret_cast<decltype(init)>(dlsym(lib, "nvmlInit_v2"));
    shutdown = reinterpret_cast<decltype(shutdown)>(dlsym(lib, "nvmlShutdown"));
    by_bus_id = reinterpret_cast<decltype(by_bus_id)>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    link_state = reinterpret_cast<decltype(link_state)>(dlsym(lib, "nvmlDeviceGetNvLinkState"));
    remote_pci =
        reinterpret_cast<decltype(remote_pci)>(dlsym(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2"));
    return init && shutdown && by_bus_id && link_state && remote_pci && init() == 0;
  }
  ~Nvml() {
    if (lib != nullptr) {
      if (shutdown != nullptr && init != nullptr) shutdown();
      dlclose(lib);
    }
  }
};

// NVML writes "00000000:18:00.0"; hwloc-style ids are "0000:18:00.0", lower case.
std::string NormalBusId(const char* raw) {
  unsigned domain = 0, bus = 0, dev = 0, func = 0;
  if (std::sscanf(raw, "%x:%x:%x.%x", &domain, &bus, &dev, &func) != 4) return "";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", domain & 0xffff, bus, dev, func);
  return buf;
}

}  // namespace

bool FillNvlinkFromNvml(Topology* topo) {
  const int n = static_cast<int>(topo->gpus.size());
  if (n == 0 || !topo->nvlink_gbps.empty()) return false;
  Nvml nvml;
  if (!nvml.Open()) return false;
  std::vector<std::vector<int>> direct(n, std::vector<int>(n, 0));
  std::vector<int> to_fabric(n, 0);
  bool any = false;
  for (int g = 0; g < n; ++g) {
    NvmlDevice dev = nullptr;
    if (nvml.by_bus_id(topo->gpus[g].pci.bus_id.c_str(), &dev) != 0) continue;
    for (unsigned link = 0; link < kNvmlMaxLinks; ++link) {
      int active = 0;
      if (nvml.link_state(dev, link, &active) != 0 || active == 0) continue;
      NvmlPciInfo remote{};
      if (nvml.remote_pci(dev, link, &remote) != 0) continue;
      any = true;
      const std::string bus = NormalBusId(remote.bus_id);
      int peer = -1;
      for (int h = 0; h < n; ++h) {
        if (topo->gpus[h].pci.bus_id == bus) peer = h;
      }
      if (peer >= 0 && peer != g) {
        ++direct[g][peer];
      } else {
        ++to_fabric[g];
      }
    }
  }
  if (!any) return false;
  topo->nvlink_gbps.assign(n, std::vector<double>(n, 0));
  topo->nvlink_links.assign(n, std::vector<int>(n, 0));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      const int links = std::max(direct[i][j], direct[j][i]) +
                        (to_fabric[i] > 0 && to_fabric[j] > 0 ? std::min(to_fabric[i], to_fabric[j])
                                                              : 0);
      topo->nvlink_links[i][j] = links;
      topo->nvlink_gbps[i][j] = links * NvlinkRawGbpsPerLink(topo->gpus[i].nvlink_generation);
    }
  }
  topo->nvswitch = std::any_of(to_fabric.begin(), to_fabric.end(), [](int l) { return l > 0; });
  topo->notes.push_back("NVLink read from NVML (hwloc reported no NVLinkBandwidth)");
  return true;
}

}  // namespace kolo
