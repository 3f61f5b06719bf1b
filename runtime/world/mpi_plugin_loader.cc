// libkolo.so's side of mpi_plugin.h: opens libkolo_mpi.so from this library's own folder (the
// build tree's, an installation's lib/, a wheel's kolo/lib/), never from the loader's search
// path, so a process always gets the plugin of its own build.
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "base/logging.h"
#include "collectives/communicator.h"
#include "kolo/config.h"
#include "runtime/peer_watch.h"
#include "runtime/world/mpi_plugin.h"

namespace kolo {
namespace {

MpiPluginHost Host() {
  MpiPluginHost host{};
  host.version = KOLO_VERSION_STRING;
  MpiPluginLayout(host.layout);
  host.log_enabled = LogEnabled;
  host.log_message = LogMessage;
  host.configure_logging = ConfigureLogging;
  host.set_log_rank = SetLogRank;
  host.watch_peers = WatchPeers;
  host.check_peers = CheckPeers;
  host.process_gone = ProcessGone;
  host.stopped_peers = StoppedPeers;
  host.next_communicator_serial = NextCommunicatorSerial;
  return host;
}

std::atomic<bool> g_opened{false};

// The folder of the file this function's code was loaded from, resolved (the loader's name for
// it may be relative to a working directory since changed, or a link in another folder).
std::string OwnFolder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&OwnFolder), &info) == 0 || info.dli_fname == nullptr) {
    return ".";
  }
  std::string path = info.dli_fname;
  if (char* real = realpath(path.c_str(), nullptr)) {
    path = real;
    std::free(real);
  }
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

StatusOr<const MpiPlugin*> Open() {
  const std::string path = OwnFolder() + "/" + kMpiPluginFile;
  // RTLD_LOCAL: the plugin's copy of the core stays its own; RTLD_NOW: a missing libmpi shows
  // here, as one error, not at the first MPI call.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return FailedPreconditionError("cannot open kolo's MPI support '" + path +
                                   "': " + (why ? why : "unknown error") +
                                   " (a start over MPI needs it and libmpi: under an MPI "
                                   "launcher, or a process without torchrun's variables)");
  }
  using Entry = const char* (*)(const MpiPluginHost*, MpiPlugin*);
  auto entry = reinterpret_cast<Entry>(dlsym(handle, kMpiPluginEntry));
  if (entry == nullptr) {
    return FailedPreconditionError("'" + path + "' has no " + kMpiPluginEntry +
                                   ": it is not kolo's MPI support");
  }
  static const MpiPluginHost host = Host();
  static MpiPlugin plugin{};
  if (const char* why = entry(&host, &plugin)) {
    return FailedPreconditionError("'" + path + "': " + why);
  }
  g_opened = true;
  KOLO_LOG_DEBUG("init", "opened {}", path);
  return &plugin;
}

}  // namespace

bool MpiLibraryLoaded() {
  if (g_opened) return true;
  // Open MPI's libmpi.so.40, MPICH's libmpi.so.12, ...
  return dl_iterate_phdr(
             [](dl_phdr_info* info, size_t, void*) {
               const char* name = info->dlpi_name;
               const char* slash = name ? std::strrchr(name, '/') : nullptr;
               return std::strncmp(slash ? slash + 1 : "", "libmpi.so", 9) == 0 ? 1 : 0;
             },
             nullptr) != 0;
}

StatusOr<const MpiPlugin*> LoadMpiPlugin() {
  static std::once_flag once;
  static StatusOr<const MpiPlugin*> loaded = FailedPreconditionError("not loaded");
  std::call_once(once, [] { loaded = Open(); });
  return loaded;
}

}  // namespace kolo
