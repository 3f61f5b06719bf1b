#include "runtime/trace_writer.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>

#include "base/logging.h"

namespace kolo {
namespace {

constexpr char kTail[] = "\n]\n";
constexpr size_t kTailSize = sizeof(kTail) - 1;

// ---- a write that a fatal signal cannot cut ---------------------------------------------------
// The kernel stops a write() to a regular file between pages when a fatal signal arrives, so
// SIGINT or SIGTERM with their default action could leave half a flush (and no closing
// bracket). Where those signals still have their default action (never over a handler of
// the application's or Python's), a handler defers them while a flush is writing:
//   handler: pending = sig; if no flush is writing -> die now (default action), else return
//   flush:   writing++; if pending -> skip; write; if --writing == 0 and pending -> die
// Each side publishes before it reads the other's flag (sequentially consistent atomics), so
// at least one of them sees the other: the process dies exactly once, never mid-write.
// SIGKILL cannot be deferred; its window is the few microseconds of a flush.
std::atomic<int> g_writing{0};
std::atomic<int> g_pending_signal{0};

void Die(int sig) {
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

void DeferWhileWriting(int sig) {
  g_pending_signal.store(sig);
  if (g_writing.load() == 0) Die(sig);  // delivered when the handler returns
}

namespace {

// Looked at on every Open, not once per process: a signal ignored at the first Open (a job
// started in the background ignores SIGINT) may have its default action again by the next one,
// in a forked child say, and then needs the deferral too.
void InstallDeferringHandlers() {
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction current {};
    if (sigaction(sig, nullptr, &current) != 0 || current.sa_handler != SIG_DFL ||
        (current.sa_flags & SA_SIGINFO)) {
      continue;  // ours already, or someone else handles (or ignores) it: their handler decides
    }
    struct sigaction mine {};
    mine.sa_handler = DeferWhileWriting;
    sigemptyset(&mine.sa_mask);
    mine.sa_flags = SA_RESTART | SA_RESETHAND;  // a second signal kills at once
    sigaction(sig, &mine, nullptr);
  }
  // A child forked while another thread was writing must not inherit "writing" (that thread
  // does not exist there), or it would defer its signals forever.
  static std::once_flag at_fork;
  std::call_once(at_fork, [] {
    pthread_atfork(nullptr, nullptr, [] {
      g_writing.store(0);
      g_pending_signal.store(0);
    });
  });
}

// pwrite of all of `data`, retried on short writes; false with errno on failure.
bool WriteAll(int fd, const char* data, size_t size, off_t offset) {
  while (size > 0) {
    const ssize_t n = ::pwrite(fd, data, size, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
    offset += n;
  }
  return true;
}

// Writes under the signal deferral above; false with errno on failure, or when the process
// is about to die of a pending signal (nothing written then).
bool WriteDeferringSignals(int fd, const std::string& data, off_t offset) {
  g_writing.fetch_add(1);
  bool ok = false;
  if (g_pending_signal.load() == 0) {
    ok = WriteAll(fd, data.data(), data.size(), offset);
  } else {
    errno = EINTR;
  }
  const int saved_errno = errno;
  if (g_writing.fetch_sub(1) == 1 && g_pending_signal.load() != 0) Die(g_pending_signal.load());
  errno = saved_errno;
  return ok;
}

std::string ErrnoText(int err) { return std::strerror(err); }

}  // namespace

StatusOr<std::unique_ptr<TraceWriter>> TraceWriter::Open(const std::string& path) {
  if (path.empty()) return InvalidArgumentError("the timeline's file path is empty");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return InvalidArgumentError("cannot open '" + path + "' for writing: " + ErrnoText(errno));
  }
  InstallDeferringHandlers();
  std::unique_ptr<TraceWriter> writer(new TraceWriter(path, fd));
  const std::string empty = std::string("[") + kTail;
  if (!WriteDeferringSignals(fd, empty, 0)) {
    return InvalidArgumentError("cannot write to '" + path + "': " + ErrnoText(errno));
  }
  return writer;
}

TraceWriter::~TraceWriter() {
  if (fd_ < 0) return;
  Status s = Flush();
  if (!s.ok()) KOLO_LOG_ERROR("timeline", "{}", s.ToString());
  ::close(fd_);
}

Status TraceWriter::Flush() {
  if (pending_.empty()) return Status::OK();
  if (::getpid() != owner_) {
    // A forked child (a data loader's worker, say) exiting normally: the file is the parent's,
    // which keeps writing at its own offset; writing here would corrupt it.
    pending_.clear();
    return Status::OK();
  }
  // The events and a new tail, over the old tail: one write keeps the array closed.
  const size_t events = pending_.size();
  pending_ += kTail;
  const bool ok = WriteDeferringSignals(fd_, pending_, end_);
  const int err = errno;
  pending_.resize(events);
  if (!ok) {
    // Put the old tail back (a short write, e.g. a full disk, may have cut through it), so
    // the file stays the valid array it was.
    if (::ftruncate(fd_, end_) == 0) WriteAll(fd_, kTail, kTailSize, end_);
    return DataLossError("timeline: cannot write to '" + path_ + "': " + ErrnoText(err));
  }
  end_ += static_cast<off_t>(events);
  any_written_ = true;
  pending_.clear();
  return Status::OK();
}

std::string JsonString(std::string_view text) {
  std::string out;
  AppendJsonString(&out, text);
  return out;
}

void AppendJsonString(std::string* target, std::string_view text) {
  std::string& out = *target;
  out.reserve(out.size() + text.size() + 2);
  out += '"';
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        case '\r': out += "\\r"; break;
        default:
          if (c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\u%04x", c);
            out += buf;
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    // A well-formed UTF-8 sequence (no overlongs, no surrogates, at most U+10FFFF) is copied;
    // anything else becomes U+FFFD, one byte at a time.
    size_t len = 0;
    uint32_t min = 0, cp = 0;
    if ((c & 0xE0) == 0xC0) {
      len = 2, min = 0x80, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, min = 0x800, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, min = 0x10000, cp = c & 0x07;
    }
    bool valid = len > 0 && i + len <= n;
    for (size_t k = 1; valid && k < len; ++k) {
      valid = (s[i + k] & 0xC0) == 0x80;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    valid = valid && cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (valid) {
      out.append(reinterpret_cast<const char*>(s + i), len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  out += '"';
}

}  // namespace kolo
