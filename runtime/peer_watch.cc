#include "runtime/peer_watch.h"

#include "runtime/trace_writer.h"

#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

namespace kolo {
namespace {

// The signal handler reads these: fixed-size, written before the handler is installed and
// then only under g_mu with the handler's data swapped in by one atomic store.
constexpr int kMaxPeers = 1024;
struct Table {
  int rank = -1;
  int size = 0;
  int pid = 0;
  char host[128] = {};
  int count = 0;
  LocalPeer peers[kMaxPeers];
};
Table g_tables[2];
std::atomic<int> g_current{-1};
std::mutex g_mu;
bool g_installed = false;
// Set by the first SIGTERM's handler: a second SIGTERM while it runs kills at once.
std::atomic<bool> g_terminating{false};

// Appends text / a number to buf (no allocation, no locale: async-signal-safe).
void Put(char* buf, size_t cap, size_t* len, const char* text) {
  while (*text && *len + 1 < cap) buf[(*len)++] = *text++;
}
void PutInt(char* buf, size_t cap, size_t* len, long v) {
  char digits[24];
  int n = 0;
  const bool negative = v < 0;
  unsigned long u = negative ? 0UL - static_cast<unsigned long>(v) : static_cast<unsigned long>(v);
  do {
    digits[n++] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u && n < 23);
  if (negative && *len + 1 < cap) buf[(*len)++] = '-';
  while (n && *len + 1 < cap) buf[(*len)++] = digits[--n];
}

// Reads /proc/<pid>/<file> into buf (NUL-terminated), at most cap - 1 bytes; the bytes read, or
// <= 0 when it cannot be read. Async-signal-safe.
ssize_t ReadProcFile(int pid, const char* file, char* buf, size_t cap) {
  char path[64];
  size_t len = 0;
  Put(path, sizeof path, &len, "/proc/");
  PutInt(path, sizeof path, &len, pid);
  Put(path, sizeof path, &len, "/");
  Put(path, sizeof path, &len, file);
  path[len] = '\0';
  const int fd = open(path, O_RDONLY);
  if (fd < 0) return -1;
  const ssize_t n = read(fd, buf, cap - 1);
  close(fd);
  if (n > 0) buf[n] = '\0';
  return n;
}

// True while `pid` runs and catches SIGTERM: under kolo's notice, its handler has not yet
// written (it restores the default action once it has). Reads the SigCgt mask of
// /proc/<pid>/status. Async-signal-safe.
bool NoticePending(int pid) {
  if (ProcessGone(pid)) return false;
  char status[4096];
  if (ReadProcFile(pid, "status", status, sizeof status) <= 0) return false;
  const char* field = strstr(status, "\nSigCgt:");
  if (!field) return false;
  unsigned long long caught = 0;
  for (const char* c = field + 8; *c && *c != '\n'; ++c) {
    if (*c >= '0' && *c <= '9') caught = caught * 16 + static_cast<unsigned>(*c - '0');
    if (*c >= 'a' && *c <= 'f') caught = caught * 16 + static_cast<unsigned>(*c - 'a' + 10);
  }
  return (caught >> (SIGTERM - 1)) & 1;
}

// Keeps this process, its notice written, while another rank on this host still catches SIGTERM
// (NoticePending: its notice not yet written), for at most a second. A launcher that ends the
// job signals every rank on the node at once and may kill the rest as soon as one dies: Open
// MPI's sends SIGCONT, SIGTERM, SIGKILL a second apart, but in a sleep() that SIGCHLD cuts
// short, so a rank that died of SIGTERM at once brought SIGKILL to the others within
// milliseconds, and one whose handler had not run yet (another process had the core) died
// without its notice. Open MPI's own SIGKILL, a second after the SIGTERM, ends a longer wait.
void AwaitPeerNotices(const Table& t) {
  constexpr long kHoldNs = 1000L * 1000 * 1000;
  constexpr long kPollNs = 2L * 1000 * 1000;
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    bool pending = false;
    for (int i = 0; i < t.count && !pending; ++i) {
      pending = t.peers[i].rank != t.rank && NoticePending(t.peers[i].pid);
    }
    if (!pending) return;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    const long waited =
        (now.tv_sec - start.tv_sec) * 1000L * 1000 * 1000 + (now.tv_nsec - start.tv_nsec);
    if (waited >= kHoldNs) return;
    struct timespec pause = {0, kPollNs};
    nanosleep(&pause, nullptr);
  }
}

void OnTerminate(int sig) {
  // A second SIGTERM, taken by another thread while this one writes its notice: die of it now.
  if (g_terminating.exchange(true)) {
    DeferWhileWriting(sig);
    return;
  }
  const int current = g_current.load();
  if (current >= 0) {
    const Table& t = g_tables[current];
    char buf[2048];
    size_t len = 0;
    Put(buf, sizeof buf, &len, "kolo: rank ");
    PutInt(buf, sizeof buf, &len, t.rank);
    Put(buf, sizeof buf, &len, "/");
    PutInt(buf, sizeof buf, &len, t.size);
    Put(buf, sizeof buf, &len, " (pid ");
    PutInt(buf, sizeof buf, &len, t.pid);
    Put(buf, sizeof buf, &len, " on ");
    Put(buf, sizeof buf, &len, t.host);
    Put(buf, sizeof buf, &len, ") terminated by SIGTERM (the launcher tears the job down, "
                               "usually because a rank failed); ");
    int gone = 0;
    for (int i = 0; i < t.count; ++i) {
      if (t.peers[i].rank == t.rank || !ProcessGone(t.peers[i].pid)) continue;
      Put(buf, sizeof buf, &len, gone++ ? ", rank " : "gone on this host: rank ");
      PutInt(buf, sizeof buf, &len, t.peers[i].rank);
      Put(buf, sizeof buf, &len, " (pid ");
      PutInt(buf, sizeof buf, &len, t.peers[i].pid);
      Put(buf, sizeof buf, &len, ")");
    }
    if (!gone) Put(buf, sizeof buf, &len, "every rank on this host is still running");
    Put(buf, sizeof buf, &len, "\n");
    ssize_t ignored = write(STDERR_FILENO, buf, len);
    (void)ignored;
    // The default action again: what the other ranks here read as "its notice is written"
    // (NoticePending), and a further SIGTERM kills at once.
    signal(SIGTERM, SIG_DFL);
    // Not in a child forked from the rank (a data loader's worker inherits this handler): the
    // ranks do not wait for it, nor it for them.
    if (static_cast<int>(getpid()) == t.pid) AwaitPeerNotices(t);
  }
  // Die of it (the previous disposition was the default), once a timeline flush in progress,
  // if any, has finished writing.
  DeferWhileWriting(sig);
}

// The state letter of /proc/<pid>/stat ('R', 'S', 'T' stopped, 't' traced, 'Z' zombie...), or
// 0 when it cannot be read. Async-signal-safe.
char ProcessState(int pid) {
  char stat[256];
  const ssize_t n = ReadProcFile(pid, "stat", stat, sizeof stat);
  if (n <= 0) return 0;
  // "pid (comm) S ...": the state follows the last ')'.
  for (ssize_t i = n - 1; i > 0; --i) {
    if (stat[i] == ')') return i + 2 < n ? stat[i + 2] : 0;
  }
  return 0;
}

}  // namespace

bool ProcessGone(int pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0) return errno == ESRCH;
  // A zombie still answers kill(); its state in /proc/<pid>/stat is 'Z'.
  return ProcessState(pid) == 'Z';
}

std::string StoppedPeers() {
  const int current = g_current.load();
  if (current < 0) return "";
  const Table& t = g_tables[current];
  std::string out;
  for (int i = 0; i < t.count; ++i) {
    if (t.peers[i].rank == t.rank) continue;
    const char state = ProcessState(t.peers[i].pid);
    if (state != 'T' && state != 't') continue;
    out += (out.empty() ? "" : ", ") + std::string("rank ") + std::to_string(t.peers[i].rank) +
           " (pid " + std::to_string(t.peers[i].pid) +
           (state == 't' ? ", stopped in a debugger)" : ", stopped by a signal)");
  }
  return out;
}

void WatchPeers(int rank, int size, const std::string& host, const std::vector<LocalPeer>& peers) {
  std::lock_guard<std::mutex> lock(g_mu);
  const int next = g_current.load() == 0 ? 1 : 0;
  Table& t = g_tables[next];
  t.rank = rank;
  t.size = size;
  t.pid = static_cast<int>(getpid());
  std::memset(t.host, 0, sizeof t.host);
  std::strncpy(t.host, host.c_str(), sizeof t.host - 1);
  t.count = 0;
  for (const LocalPeer& p : peers) {
    if (t.count < kMaxPeers) t.peers[t.count++] = p;
  }
  g_current.store(next);
  if (g_installed) return;
  struct sigaction current;
  if (sigaction(SIGTERM, nullptr, &current) != 0) return;
  // An application (or Python) that handles SIGTERM itself keeps its handler.
  if (current.sa_handler != SIG_DFL || (current.sa_flags & SA_SIGINFO)) return;
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = OnTerminate;
  // Not SA_RESETHAND: the handler restores the default itself once its notice is written,
  // which the other ranks on this host wait for (AwaitPeerNotices).
  action.sa_flags = 0;
  sigemptyset(&action.sa_mask);
  if (sigaction(SIGTERM, &action, nullptr) == 0) g_installed = true;
}

Status CheckPeers() {
  const int current = g_current.load();
  if (current < 0) return Status::OK();
  const Table& t = g_tables[current];
  // Every one that is gone, not the first: by the time this check runs, a survivor that
  // reported the lost rank may have ended too, and naming only the lower rank would blame it.
  std::string gone;
  int count = 0;
  for (int i = 0; i < t.count; ++i) {
    if (t.peers[i].rank == t.rank || !ProcessGone(t.peers[i].pid)) continue;
    gone += (count++ ? ", rank " : "rank ") + std::to_string(t.peers[i].rank) + " (pid " +
            std::to_string(t.peers[i].pid) + " on " + t.host + ") is gone";
  }
  if (count == 0) return Status::OK();
  return UnavailableError(
      gone + (count == 1 ? ": it exited or was killed" : ": they exited or were killed") +
      " without shutting kolo down");
}

}  // namespace kolo
