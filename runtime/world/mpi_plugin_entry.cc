// libkolo_mpi.so's side of mpi_plugin.h: the entry point, and the functions whose state is
// libkolo.so's (the log, the peer watch), defined here as calls into it. Built into the plugin
// only: the plugin's copy of the core is linked without base/logging.cc and runtime/peer_watch.cc,
// so these are the only definitions it has.
#include <mpi.h>

#include <cstring>
#include <string>

#include "base/logging.h"
#include "collectives/communicator.h"
#include "kolo/config.h"
#include "runtime/peer_watch.h"
#include "runtime/world/mpi_bootstrap.h"
#include "runtime/world/mpi_plugin.h"

namespace kolo {
namespace {

const MpiPluginHost* g_host = nullptr;

StatusOr<MPI_Comm> CommFromFortran(int handle) {
  // Open MPI aborts the process on MPI_Comm_f2c outside MPI_Init..MPI_Finalize.
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) {
    return FailedPreconditionError(
        std::string("kolo_init_comm: MPI is ") + (finalized ? "finalized" : "not initialised") +
        ", so the Fortran handle " + std::to_string(handle) + " names no communicator");
  }
  MPI_Comm comm = MPI_Comm_f2c(static_cast<MPI_Fint>(handle));
#if defined(OPEN_MPI)
  if (comm == nullptr) {  // Open MPI's answer for a handle out of its table
    return InvalidArgumentError("kolo_init_comm: the Fortran handle " + std::to_string(handle) +
                                " names no communicator");
  }
#endif
  return comm;
}

}  // namespace

bool LogEnabled(LogLevel level) { return g_host->log_enabled(level); }
void LogMessage(LogLevel level, std::string_view subsystem, std::string_view message) {
  g_host->log_message(level, subsystem, message);
}
void ConfigureLogging(LogLevel level, bool hide_time) {
  g_host->configure_logging(level, hide_time);
}
void SetLogRank(int rank, int size) { g_host->set_log_rank(rank, size); }
void WatchPeers(int rank, int size, const std::string& host, const std::vector<LocalPeer>& peers) {
  g_host->watch_peers(rank, size, host, peers);
}
Status CheckPeers() { return g_host->check_peers(); }
bool ProcessGone(int pid) { return g_host->process_gone(pid); }
std::string StoppedPeers() { return g_host->stopped_peers(); }

}  // namespace kolo

extern "C" __attribute__((visibility("default"))) const char* kolo_mpi_plugin_v1(
    const kolo::MpiPluginHost* host, kolo::MpiPlugin* plugin) {
  if (host == nullptr || plugin == nullptr) return "no host or plugin table given";
  size_t layout[kolo::kMpiPluginLayouts];
  kolo::MpiPluginLayout(layout);
  if (std::strcmp(host->version, KOLO_VERSION_STRING) != 0) {
    return "libkolo_mpi.so is kolo " KOLO_VERSION_STRING ", not the version of libkolo.so";
  }
  if (std::memcmp(layout, host->layout, sizeof(layout)) != 0) {
    return "libkolo_mpi.so was built from other sources than libkolo.so (the layouts of what "
           "they share differ)";
  }
  kolo::g_host = host;
  kolo::SetCommunicatorSerialSource(host->next_communicator_serial);
  plugin->on_world = kolo::MpiBootstrapOnWorld;
  plugin->on_ranks = kolo::MpiBootstrapOnRanks;
  plugin->on_comm = kolo::MpiBootstrapOnComm;
  plugin->comm_from_fortran = kolo::CommFromFortran;
  plugin->threads_multiple = kolo::MpiThreadsMultiple;
  return nullptr;
}
