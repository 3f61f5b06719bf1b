// Open MPI's TCP transport as kolo's algorithms need it: set for MPI_Init (kolo_init, when kolo
// initialises MPI; kolo-bench), never over the user's own setting.
//
// kolo's recursive doubling and halving (rd, Rabenseifner, hierarchical's cross-node step)
// exchange in pairs: each rank sends to and receives from the same peer at once, both ways over
// one TCP connection. Open MPI's TCP BTL moves a large message (over 64 KiB) by its RDMA
// pipeline protocol when the BTL offers "put" (its default): the receiver asks for the data in
// control messages, and in a swap each of those waits on that same connection behind the
// receiver's own outgoing data. Both directions then take turns: two nodes over a 1 Gbit/s link
// swapped 1 MiB at 0.063-0.069 GB/s per direction, a ping-pong's half, in 4 of 4 runs; without
// "put" (the send protocol: 128 KiB fragments pushed by the sender) at 0.096-0.120, the link's
// rate both ways at once. On unshaped veth links (the cores the limit) 4 MiB swaps went from
// 1.2 to 2.0-2.3 GB/s per direction, the ping-pong unchanged at 3.7 (docs/benchmarks.md, "Across
// nodes"). Shared memory (vader) and other transports ignore the setting.
//
// A user's OMPI_MCA_btl_tcp_flags (also what `mpirun --mca btl_tcp_flags ...` passes to the
// ranks) is left as it is; a value in one of Open MPI's parameter files ranks below the
// environment and is replaced. Where the application initialises MPI before kolo, this cannot
// take effect: the launch command sets it instead (README.md, "Open MPI's TCP transport").
#ifndef KOLO_COLLECTIVES_MPI_TCP_DEFAULTS_H_
#define KOLO_COLLECTIVES_MPI_TCP_DEFAULTS_H_

#include <mpi.h>

#include <cstdlib>

namespace kolo {

// Open MPI 4.1's default flags less "put" and "hetero-rdma" (which only qualifies put).
inline constexpr char kOpenMpiTcpFlags[] = "send,inplace,need-ack,need-csum";

// Held around MPI_Init: sets OMPI_MCA_btl_tcp_flags where the user has not, and takes it out
// again when it goes (Open MPI has read it by then), so that the process's environment, which
// child processes inherit, is left as the user made it. setenv and unsetenv race with a getenv
// on another thread (the application's, or Open MPI's and PMIx's own once MPI_Init has started
// them); the variable is read once, at MPI_Init, and the window is these two calls.
class OpenMpiTcpDefaults {
 public:
  OpenMpiTcpDefaults() {
#ifdef OMPI_MAJOR_VERSION
    set_ = std::getenv(kVariable) == nullptr && setenv(kVariable, kOpenMpiTcpFlags, 0) == 0;
#endif
  }
  ~OpenMpiTcpDefaults() {
    if (set_) unsetenv(kVariable);
  }
  // Whether this guard set the variable (the user had not).
  bool set() const { return set_; }
  OpenMpiTcpDefaults(const OpenMpiTcpDefaults&) = delete;
  OpenMpiTcpDefaults& operator=(const OpenMpiTcpDefaults&) = delete;

 private:
  static constexpr char kVariable[] = "OMPI_MCA_btl_tcp_flags";
  bool set_ = false;
};

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_MPI_TCP_DEFAULTS_H_
