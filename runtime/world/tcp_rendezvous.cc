#include "runtime/world/tcp_rendezvous.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <utility>

#include "base/rank_list.h"

namespace kolo {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kMagic[8] = {'k', 'o', 'l', 'o', '-', 'r', 'd', 'v'};
constexpr uint32_t kVersion = 2;  // 2: the error frame carries its status code
// Larger frames are refused unread: no start-up message comes near it, and a peer that is not
// kolo (or another version) must not make a rank allocate what its bytes happen to say.
constexpr uint64_t kMaxFrame = uint64_t{1} << 30;
// How much longer than the start timeout a connected rank waits for rank 0's answer: the time
// rank 0's failure takes to reach it.
constexpr double kVerdictMarginS = 1.0;

Clock::time_point After(double seconds) {
  return Clock::now() + std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
}

int MillisLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(left.count(), 1 << 30)));
}

std::string Errno() { return std::strerror(errno); }

void PutU32(std::string* s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutU64(std::string* s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
// Reads an integer at *at, advancing it; false when `s` is too short.
template <typename T>
bool Get(const std::string& s, size_t* at, T* v) {
  if (*at > s.size() || s.size() - *at < sizeof(T)) return false;
  T out = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    out |= static_cast<T>(static_cast<unsigned char>(s[*at + i])) << (8 * i);
  }
  *at += sizeof(T);
  *v = out;
  return true;
}

Status WriteAll(int fd, const char* data, size_t n, const std::string& peer) {
  while (n > 0) {
    const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return UnavailableError("rendezvous: sending to " + peer + ": " + Errno());
    data += w;
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

Status ReadAll(int fd, char* data, size_t n, Clock::time_point deadline, const std::string& peer,
               const std::string& waiting_for) {
  while (n > 0) {
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, MillisLeft(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return UnavailableError("rendezvous: poll: " + Errno());
    if (ready == 0) {
      return DeadlineExceededError("rendezvous: " + peer + " sent nothing while waiting for " +
                                   waiting_for);
    }
    const ssize_t r = ::recv(fd, data, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return UnavailableError("rendezvous: receiving from " + peer + ": " + Errno());
    if (r == 0) {
      return UnavailableError("rendezvous: " + peer + " closed its connection while waiting for " +
                              waiting_for);
    }
    data += r;
    n -= static_cast<size_t>(r);
  }
  return Status::OK();
}

Status SendFrame(int fd, char kind, const std::string& payload, const std::string& peer) {
  std::string frame(1, kind);
  PutU64(&frame, payload.size());
  frame += payload;
  return WriteAll(fd, frame.data(), frame.size(), peer);
}

Status RecvFrame(int fd, Clock::time_point deadline, const std::string& peer,
                 const std::string& waiting_for, char* kind, std::string* payload) {
  char header[9];
  KOLO_RETURN_IF_ERROR(ReadAll(fd, header, sizeof header, deadline, peer, waiting_for));
  const std::string h(header, sizeof header);
  size_t at = 1;
  uint64_t length = 0;
  Get(h, &at, &length);
  if (length > kMaxFrame) {
    return DataLossError("rendezvous: " + peer + " sent a frame of " + std::to_string(length) +
                         " bytes (is it a kolo rendezvous of the same version?)");
  }
  *kind = header[0];
  payload->assign(static_cast<size_t>(length), '\0');
  return ReadAll(fd, payload->data(), payload->size(), deadline, peer, waiting_for);
}

// The payload of an 'E' frame: the status code, then the message. The code travels so that
// every rank fails the same way (a rank that never came is DEADLINE_EXCEEDED on all of them).
std::string ErrorPayload(const Status& s) {
  return std::string(1, static_cast<char>(s.code())) + s.message();
}

// An 'E' frame from the peer as this side's error; any other unexpected kind as a protocol error.
Status Unexpected(char kind, const std::string& payload, const std::string& peer) {
  if (kind == 'E') {
    const int code = payload.empty() ? 0 : static_cast<unsigned char>(payload[0]);
    const bool known = code > static_cast<int>(StatusCode::kOk) &&
                       code <= static_cast<int>(StatusCode::kUnauthenticated);
    return Status(known ? static_cast<StatusCode>(code) : StatusCode::kUnavailable,
                  payload.empty() ? std::string() : payload.substr(1));
  }
  return DataLossError("rendezvous: " + peer + " sent a frame of kind " +
                       std::to_string(static_cast<int>(kind)) + " (not a kolo rendezvous?)");
}

std::string RankName(int rank) { return "rank " + std::to_string(rank); }

std::string SecondsText(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", s);
  return text;
}

void CloseFd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

// The addresses of `address`:`port` (passive: for bind).
StatusOr<addrinfo*> Resolve(const std::string& address, int port, bool passive,
                            const std::string& where) {
  addrinfo hints;
  std::memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc =
      ::getaddrinfo(address.empty() ? nullptr : address.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) {
    return InvalidArgumentError("rendezvous: cannot resolve MASTER_ADDR '" + address + "' (" +
                                where + "): " + ::gai_strerror(rc));
  }
  return found;
}

void NoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// One connection attempt to `ai`, at most until `deadline`: the socket, or -1 with *why.
int TryConnect(const addrinfo* ai, Clock::time_point deadline, std::string* why) {
  const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd < 0) {
    *why = Errno();
    return -1;
  }
  // Non-blocking, so an address that drops packets costs the start timeout, not TCP's minutes.
  const int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
  if (rc < 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    rc = ::poll(&p, 1, std::max(1, MillisLeft(deadline)));
    int error = 0;
    socklen_t len = sizeof error;
    if (rc == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0) {
      rc = 0;
    } else {
      errno = rc == 0 ? ETIMEDOUT : (error != 0 ? error : errno);
      rc = -1;
    }
  }
  if (rc < 0) {
    *why = Errno();
    ::close(fd);
    return -1;
  }
  ::fcntl(fd, F_SETFL, flags);
  NoDelay(fd);
  return fd;
}

}  // namespace

TcpRendezvous::~TcpRendezvous() {
  for (int& fd : clients_) CloseFd(&fd);
  CloseFd(&listener_);
  CloseFd(&server_);
}

StatusOr<std::unique_ptr<TcpRendezvous>> TcpRendezvous::Serve(const RendezvousOptions& options) {
  std::unique_ptr<TcpRendezvous> r(new TcpRendezvous(options));
  r->where_ = options.address + ":" + std::to_string(options.port);
  r->clients_.assign(static_cast<size_t>(std::max(options.size, 1)), -1);
  if (options.size == 1) return r;
  KOLO_ASSIGN_OR_RETURN(addrinfo * found, Resolve(options.address, options.port, true, r->where_));
  std::string why = "no address";
  for (const addrinfo* ai = found; ai != nullptr && r->listener_ < 0; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      why = Errno();
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, options.size) != 0) {
      why = Errno();
      ::close(fd);
      continue;
    }
    r->listener_ = fd;
  }
  ::freeaddrinfo(found);
  if (r->listener_ < 0) {
    return UnavailableError("rendezvous: rank 0 cannot serve on " + r->where_ + ": " + why +
                            (why == std::strerror(EADDRINUSE)
                                 ? " (another job, or torchrun's own store, holds MASTER_PORT)"
                                 : ""));
  }
  sockaddr_storage bound;
  socklen_t len = sizeof bound;
  ::getsockname(r->listener_, reinterpret_cast<sockaddr*>(&bound), &len);
  r->port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                               : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  r->where_ = options.address + ":" + std::to_string(r->port_);
  return r;
}

Status TcpRendezvous::FailClients(const Status& why) {
  for (int& fd : clients_) {
    if (fd >= 0) {
      (void)SendFrame(fd, 'E', ErrorPayload(Status(why.code(), "rank 0: " + why.message())),
                      RankName(0));
    }
    CloseFd(&fd);
  }
  return why;
}

Status TcpRendezvous::AwaitRanks() {
  const int size = options_.size;
  const Clock::time_point deadline = After(options_.start_timeout_s);
  int joined = 1;
  while (joined < size) {
    pollfd p{listener_, POLLIN, 0};
    const int ready = ::poll(&p, 1, MillisLeft(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      std::vector<int> missing;
      for (int r = 1; r < size; ++r) {
        if (clients_[static_cast<size_t>(r)] < 0) missing.push_back(r);
      }
      return FailClients(DeadlineExceededError("rendezvous at " + where_ + ": rank(s) " +
                                               BracketedRanks(missing) + " did not arrive within " +
                                               SecondsText(options_.start_timeout_s) +
                                               " (KOLO_START_TIMEOUT)"));
    }
    if (ready < 0) return FailClients(UnavailableError("rendezvous: poll: " + Errno()));
    const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    NoDelay(fd);
    // The hello comes right after the connection; a connection that says nothing within a few
    // seconds is not a kolo rank and must not hold up the others.
    char kind = 0;
    std::string hello;
    const Clock::time_point hello_by = std::min(deadline, After(5));
    if (!RecvFrame(fd, hello_by, "a new connection", "its hello", &kind, &hello).ok() ||
        kind != 'H') {
      ::close(fd);
      continue;
    }
    size_t at = sizeof kMagic;
    uint32_t version = 0, rank = 0, their_size = 0;
    std::string refusal;
    if (hello.compare(0, sizeof kMagic, kMagic, sizeof kMagic) != 0 || !Get(hello, &at, &version) ||
        !Get(hello, &at, &rank) || !Get(hello, &at, &their_size)) {
      refusal = "not a kolo rendezvous hello";
    } else if (version != kVersion) {
      refusal = "rendezvous version " + std::to_string(version) + ", rank 0 speaks " +
                std::to_string(kVersion);
    } else if (hello.substr(at) != options_.token) {
      refusal = "rank 0 at " + where_ + " serves another job (its token '" + options_.token +
                "', this rank's '" + hello.substr(at) + "'): is MASTER_PORT shared by two jobs?";
    } else if (static_cast<int>(their_size) != size) {
      refusal = "WORLD_SIZE differs: rank 0 has " + std::to_string(size) + ", rank " +
                std::to_string(rank) + " has " + std::to_string(their_size);
    } else if (rank == 0 || static_cast<int>(rank) >= size) {
      refusal = "RANK " + std::to_string(rank) + " is not in [1, " + std::to_string(size) +
                ") (rank 0 is the one serving)";
    } else if (clients_[rank] >= 0) {
      refusal = "RANK " + std::to_string(rank) + " arrived twice (two processes with one RANK)";
    }
    if (!refusal.empty()) {
      (void)SendFrame(fd, 'E', ErrorPayload(InvalidArgumentError("rank 0: " + refusal)),
                      "a new connection");
      ::close(fd);
      continue;
    }
    clients_[rank] = fd;
    ++joined;
  }
  for (int r = 1; r < size; ++r) {
    Status s = SendFrame(clients_[static_cast<size_t>(r)], 'O', "", RankName(r));
    if (!s.ok()) return FailClients(s);
  }
  return Status::OK();
}

StatusOr<std::unique_ptr<TcpRendezvous>> TcpRendezvous::Connect(const RendezvousOptions& options) {
  std::unique_ptr<TcpRendezvous> r(new TcpRendezvous(options));
  r->port_ = options.port;
  r->where_ = options.address + ":" + std::to_string(options.port);
  const Clock::time_point deadline = After(options.start_timeout_s);
  std::string why = "nothing tried";
  std::string hello(kMagic, sizeof kMagic);
  PutU32(&hello, kVersion);
  PutU32(&hello, static_cast<uint32_t>(options.rank));
  PutU32(&hello, static_cast<uint32_t>(options.size));
  hello += options.token;
  const std::string peer = "rank 0 at " + r->where_;
  for (;;) {
    while (r->server_ < 0) {
      KOLO_ASSIGN_OR_RETURN(addrinfo * found,
                            Resolve(options.address, options.port, false, r->where_));
      for (const addrinfo* ai = found; ai != nullptr && r->server_ < 0; ai = ai->ai_next) {
        r->server_ = TryConnect(ai, deadline, &why);
      }
      ::freeaddrinfo(found);
      if (r->server_ >= 0) break;
      if (Clock::now() >= deadline) {
        return DeadlineExceededError(
            "rendezvous: rank " + std::to_string(options.rank) + " found no rank 0 at " +
            r->where_ + " within " + SecondsText(options.start_timeout_s) +
            " (last attempt: " + why +
            "): is rank 0 running, and are MASTER_ADDR and MASTER_PORT the same on every rank?");
      }
      // Rank 0 may not be listening yet.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    char kind = 0;
    std::string payload;
    Status s = SendFrame(r->server_, 'H', hello, peer);
    if (s.ok()) {
      // Rank 0 decides when the start has failed, and it was listening before this connection:
      // its verdict (a rank that never came, named) comes within the start timeout from now.
      // Waiting only until this rank's own deadline would, on a late start, fail first with
      // less to say.
      const Clock::time_point verdict = After(options.start_timeout_s + kVerdictMarginS);
      s = RecvFrame(r->server_, verdict, peer, "the other ranks to arrive", &kind, &payload);
    }
    if (s.ok()) {
      if (kind != 'O') return Unexpected(kind, payload, peer);
      return r;
    }
    // A connection closed before any answer: a listener on its way out (rank 0 restarting kolo
    // on the same port accepted nothing yet). Try again while there is time.
    CloseFd(&r->server_);
    if (s.code() != StatusCode::kUnavailable || Clock::now() >= deadline) return s;
    why = s.message();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

Status TcpRendezvous::Allgather(const std::string& mine, std::vector<std::string>* all) {
  const int size = options_.size;
  all->assign(static_cast<size_t>(size), std::string());
  const Clock::time_point deadline = After(options_.round_timeout_s);
  if (options_.rank != 0) {
    const std::string peer = "rank 0 at " + where_;
    if (server_ < 0) return FailedPreconditionError("rendezvous: connection to rank 0 is closed");
    KOLO_RETURN_IF_ERROR(SendFrame(server_, 'D', mine, peer));
    char kind = 0;
    std::string round;
    KOLO_RETURN_IF_ERROR(RecvFrame(server_, deadline, peer, "an all-gather round", &kind, &round));
    if (kind != 'D') return Unexpected(kind, round, peer);
    size_t at = 0;
    uint32_t count = 0;
    if (!Get(round, &at, &count) || static_cast<int>(count) != size) {
      return DataLossError("rendezvous: a malformed all-gather round from " + peer);
    }
    for (int r = 0; r < size; ++r) {
      uint64_t length = 0;
      if (!Get(round, &at, &length) || round.size() - at < length) {
        return DataLossError("rendezvous: a malformed all-gather round from " + peer);
      }
      (*all)[static_cast<size_t>(r)] = round.substr(at, static_cast<size_t>(length));
      at += static_cast<size_t>(length);
    }
    return Status::OK();
  }
  (*all)[0] = mine;
  for (int r = 1; r < size; ++r) {
    int& fd = clients_[static_cast<size_t>(r)];
    if (fd < 0)
      return FailClients(
          UnavailableError("rendezvous: rank " + std::to_string(r) + " is no longer connected"));
    char kind = 0;
    Status s = RecvFrame(fd, deadline, RankName(r), "its part of an all-gather round", &kind,
                         &(*all)[static_cast<size_t>(r)]);
    if (s.ok() && kind != 'D') s = Unexpected(kind, (*all)[static_cast<size_t>(r)], RankName(r));
    if (!s.ok()) return FailClients(s);
  }
  std::string round;
  PutU32(&round, static_cast<uint32_t>(size));
  for (const std::string& part : *all) {
    PutU64(&round, part.size());
    round += part;
  }
  for (int r = 1; r < size; ++r) {
    Status s = SendFrame(clients_[static_cast<size_t>(r)], 'D', round, RankName(r));
    if (!s.ok()) return FailClients(s);
  }
  return Status::OK();
}

}  // namespace kolo
