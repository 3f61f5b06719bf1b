// The file behind the timeline: a JSON array of Chrome trace events that is valid JSON after
// every flush, so a job killed at any moment (SIGINT from the terminal, SIGTERM or SIGKILL
// from mpirun) leaves a file that Perfetto, chrome://tracing and json.load all open.
//
// How: the file always ends in "\n]\n". A flush writes the buffered events *over* that tail,
// followed by a new tail, with one pwrite() at the tail's offset. The write only grows the
// file, and a signal is delivered between system calls, not inside a write to a regular file,
// so the file is either the old valid array or the new one. What a kill loses is the events
// buffered since the last flush (the Timeline flushes every few tens of milliseconds), never
// the file's validity. This is why no signal handler is needed: installing one in a library
// would fight Python's KeyboardInterrupt and the application's own handlers.
//
// Not thread-safe: the Timeline serialises its calls.
#ifndef KOLO_RUNTIME_TRACE_WRITER_H_
#define KOLO_RUNTIME_TRACE_WRITER_H_

#include <sys/types.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace kolo {

// The fatal-signal end of a handler (async-signal-safe): dies of `sig` with its default action
// now, or, while a trace flush is writing, as soon as that write is complete. Other SIGTERM
// handlers of kolo's (runtime/peer_watch.cc) end with it, so the timeline survives them too.
void DeferWhileWriting(int sig);

class TraceWriter {
 public:
  // Creates or truncates `path` and writes an empty array ("[\n]\n"). kInvalidArgument naming
  // the path and the system's reason when it cannot be opened or written ("cannot open
  // '/x/t.json' for writing: No such file or directory"; callers add what the path was for).
  static StatusOr<std::unique_ptr<TraceWriter>> Open(const std::string& path);
  ~TraceWriter();  // Flush(), then close; errors are logged
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Buffers one event, a complete JSON object ("{...}"), for the next Flush.
  void Append(std::string_view event) { NextEvent() += event; }
  // The buffer to append the next event to, in place (the caller appends one whole object).
  std::string& NextEvent() {
    pending_ += (any_written_ || !pending_.empty()) ? ",\n" : "\n";
    return pending_;
  }
  // Writes the buffered events into the file, which stays a valid array. An error (disk full)
  // is returned once per failure; the buffered events are kept for the next try.
  Status Flush();

  // Drops the buffered events (after a failed Flush, before closing).
  void Discard() { pending_.clear(); }

  size_t buffered_bytes() const { return pending_.size(); }
  const std::string& path() const { return path_; }

 private:
  TraceWriter(std::string path, int fd) : path_(std::move(path)), fd_(fd), owner_(::getpid()) {}

  std::string path_;
  int fd_ = -1;
  pid_t owner_;  // the process that opened the file; only it writes
  off_t end_ = 1;             // where the next events go: just after "[" or the last event
  bool any_written_ = false;  // an event precedes end_ (the next one needs a comma)
  std::string pending_;       // events since the last flush, separated, without the tail
};

// `text` as a JSON string literal, quotes included: '"', '\' and control characters escaped,
// invalid UTF-8 bytes replaced by U+FFFD (tensor names are arbitrary bytes; JSON is UTF-8).
std::string JsonString(std::string_view text);
void AppendJsonString(std::string* out, std::string_view text);

}  // namespace kolo

#endif  // KOLO_RUNTIME_TRACE_WRITER_H_
