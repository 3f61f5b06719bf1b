// A job's ranks meeting over TCP without MPI: the out-of-band channel of a start from
// torchrun-style variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT). Rank 0 serves on
// MASTER_ADDR:MASTER_PORT; every other rank connects to it. What it carries is small and rare
// (the start-up agreements, the topologies, the UCX worker addresses), so it is a star: each
// all-gather is every rank's bytes to rank 0, then everything back to each rank.
//
// Wire format, on each rank's one connection to rank 0 (integers little-endian):
//   frame   = kind (1 byte) | length (u64) | payload
//   'H' hello, client -> rank 0: magic "kolo-rdv" | version u32 | rank u32 | size u32 | token
//   'O' welcome, rank 0 -> client, once every rank has said hello: empty
//   'E' error, either way: status code (1 byte) | message; the receiver fails with both
//   'D' data, one all-gather round: client -> rank 0 its bytes; rank 0 -> client the round,
//       count u32, then per rank length u64 | bytes
//
// Why a token: a second job started on a port already serving one must fail, not join the wrong
// job. The hello carries the job's token (the launcher's run id when there is one); rank 0
// answers a hello with another token, another size, a rank out of range or a rank it has
// already met with an error naming both values, and keeps waiting for its own ranks.
//
// Bounded time everywhere: rank 0 waits for the hellos until the start timeout and then fails
// naming the ranks that never came (and tells those that did, with the same status code); a
// client retries its connection until the same timeout, then fails naming the address, and once
// connected waits for rank 0's answer one start timeout (and a second) from then, so that rank 0's
// verdict reaches it however late it started; each all-gather round waits at most the
// round timeout; a connection that closes fails the round on rank 0 naming the rank, and rank 0
// tells the others. Threading: one thread at a time (the application's, at kolo_init).
#ifndef KOLO_RUNTIME_WORLD_TCP_RENDEZVOUS_H_
#define KOLO_RUNTIME_WORLD_TCP_RENDEZVOUS_H_

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace kolo {

struct RendezvousOptions {
  std::string address;  // MASTER_ADDR: a host name or an IPv4/IPv6 address
  int port = 0;         // MASTER_PORT; 0 on rank 0: any free port (port() tells which)
  int rank = 0;
  int size = 1;
  std::string token;             // the same on every rank of one job
  double start_timeout_s = 60;   // for the ranks to meet
  double round_timeout_s = 300;  // for one all-gather round
};

class TcpRendezvous {
 public:
  // Rank 0: binds and listens (kUnavailable naming the address and the reason when it cannot,
  // e.g. the port is in use); returns at once, before any rank has connected.
  static StatusOr<std::unique_ptr<TcpRendezvous>> Serve(const RendezvousOptions& options);
  // Any other rank: connects (retrying until the start timeout), says hello and waits for the
  // welcome. Fails naming the address when nothing answers, or with rank 0's error.
  static StatusOr<std::unique_ptr<TcpRendezvous>> Connect(const RendezvousOptions& options);
  ~TcpRendezvous();
  TcpRendezvous(const TcpRendezvous&) = delete;
  TcpRendezvous& operator=(const TcpRendezvous&) = delete;

  // Rank 0, after Serve: waits for every other rank's hello, then welcomes them all.
  Status AwaitRanks();

  // Collective: every rank's `mine`, in rank order, into *all.
  Status Allgather(const std::string& mine, std::vector<std::string>* all);

  int port() const { return port_; }
  int rank() const { return options_.rank; }
  int size() const { return options_.size; }

 private:
  explicit TcpRendezvous(const RendezvousOptions& options) : options_(options) {}
  Status FailClients(const Status& why);  // rank 0: tells every connected rank, returns `why`

  RendezvousOptions options_;
  int port_ = 0;
  int listener_ = -1;         // rank 0
  std::vector<int> clients_;  // rank 0: the connection of each rank (index = rank; 0 unused)
  int server_ = -1;           // other ranks: the connection to rank 0
  std::string where_;         // "MASTER_ADDR:MASTER_PORT", for errors
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_WORLD_TCP_RENDEZVOUS_H_
