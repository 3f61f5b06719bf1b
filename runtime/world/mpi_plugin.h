// The start over MPI as a plugin: libkolo.so does not link libmpi. Everything that calls MPI (the
// MPI bootstrap, the MPI communicator, the PMIx start fence) is built into libkolo_mpi.so, which
// libkolo.so opens from its own folder the first time a process starts over MPI (kolo_init under
// mpirun or srun, kolo_init_ranks, kolo_init_comm, kolo_mpi_threads_supported). A process started
// without MPI (torchrun's variables: env_bootstrap.h) never opens it, so no libmpi, Open MPI or
// PMIx library is loaded there.
//
// Why a plugin and not a lazy libmpi: Open MPI's predefined handles (MPI_COMM_WORLD, MPI_BYTE,
// MPI_SUM) are addresses of data symbols in libmpi, which the dynamic linker must resolve when
// the library that uses them loads; there is no lazy binding for data. The code that names them
// has to live in a library that is loaded only when MPI is wanted.
//
// The plugin carries its own (hidden) copy of the core it uses (the Bootstrap and Communicator
// base classes, the reduction kernels, the agreements), as kolo-bench does: libkolo.so exports
// only the C API. The objects it returns (a Bootstrap, and the Communicators it makes) are used
// by libkolo.so through their virtual functions, so both must come from one build: libkolo.so
// opens only the plugin in its own folder (installed and packaged together), and the entry
// refuses one whose version or layouts (the two tables, Config, Communicator, Status) differ. What
// must be one per process is libkolo.so's and reaches the plugin as MpiPluginHost: the log (its
// level and the rank in its prefix), the peer watch (peer_watch.h: the table of same-host peers
// that the liveness checks and the SIGTERM report read) and the counter of communicator serials
// (communicator.h: what is kept per communicator, its NCCL communicators, is keyed by them). The
// plugin's definitions of those functions forward to it (mpi_plugin_entry.cc), and its copy of the
// core is linked without theirs.
//
// The plugin stays loaded until the process exits (no dlclose): its code runs in the objects it
// made and in MPI's at-exit hooks.
#ifndef KOLO_RUNTIME_WORLD_MPI_PLUGIN_H_
#define KOLO_RUNTIME_WORLD_MPI_PLUGIN_H_

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/logging.h"
#include "base/status.h"
#include "collectives/communicator.h"
#include "runtime/config.h"
#include "runtime/peer_watch.h"
#include "runtime/world/bootstrap.h"

namespace kolo {

// How many sizes MpiPluginLayout compares.
constexpr int kMpiPluginLayouts = 5;

// libkolo.so's process-wide state, as the plugin reaches it.
struct MpiPluginHost {
  const char* version;  // KOLO_VERSION_STRING of libkolo.so
  size_t layout[kMpiPluginLayouts];  // MpiPluginLayout() there
  bool (*log_enabled)(LogLevel level);
  void (*log_message)(LogLevel level, std::string_view subsystem, std::string_view message);
  void (*configure_logging)(LogLevel level, bool hide_time);
  void (*set_log_rank)(int rank, int size);
  void (*watch_peers)(int rank, int size, const std::string& host,
                      const std::vector<LocalPeer>& peers);
  Status (*check_peers)();
  bool (*process_gone)(int pid);
  std::string (*stopped_peers)();
  uint64_t (*next_communicator_serial)();  // communicator.h: serials unique in the process
};

// What the plugin provides: the starts of mpi_bootstrap.h.
struct MpiPlugin {
  StatusOr<std::unique_ptr<Bootstrap>> (*on_world)(double start_timeout_seconds);
  StatusOr<std::unique_ptr<Bootstrap>> (*on_ranks)(const std::vector<int>& ranks,
                                                   double start_timeout_seconds);
  StatusOr<std::unique_ptr<Bootstrap>> (*on_comm)(MPI_Comm comm, double start_timeout_seconds);
  // The communicator of a Fortran handle (mpi4py's py2f()), for kolo_init_comm_fortran: an
  // error when MPI is not running or the handle names no communicator.
  StatusOr<MPI_Comm> (*comm_from_fortran)(int handle);
  bool (*threads_multiple)();
};

// The sizes of what crosses between the two libraries, as each side was compiled; the entry
// compares libkolo.so's with its own.
inline void MpiPluginLayout(size_t (&layout)[kMpiPluginLayouts]) {
  layout[0] = sizeof(MpiPluginHost);
  layout[1] = sizeof(MpiPlugin);
  layout[2] = sizeof(Config);
  layout[3] = sizeof(Communicator);
  layout[4] = sizeof(Status);
}

// The plugin's one exported symbol: checks `host` (version and layout), keeps it, and fills
// `plugin`. Returns nullptr, or why the two libraries do not belong together.
extern "C" const char* kolo_mpi_plugin_v1(const MpiPluginHost* host, MpiPlugin* plugin);
constexpr char kMpiPluginEntry[] = "kolo_mpi_plugin_v1";
constexpr char kMpiPluginFile[] = "libkolo_mpi.so";

// In libkolo.so (mpi_plugin_loader.cc): the plugin, opened on first use from the folder of the
// library this code is in; the same answer ever after. Fails naming the file and the loader's
// reason (a plugin missing from an installation, libmpi missing on this machine).
StatusOr<const MpiPlugin*> LoadMpiPlugin();
// True when MPI can be running in this process: the plugin is open, or the application loaded
// an MPI library itself (mpi4py, a program linked with MPI). Opens nothing.
bool MpiLibraryLoaded();

}  // namespace kolo

#endif  // KOLO_RUNTIME_WORLD_MPI_PLUGIN_H_
