#include "runtime/timeline.h"

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <set>

#include "base/logging.h"
#include "runtime/runtime.h"

namespace kolo {
namespace {

// Buffered events beyond this are written at once, whatever the interval.
constexpr size_t kMaxBufferedBytes = 1 << 20;

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

const std::string& NegotiateName(OpType op) {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (int op = 0; op <= kMaxOpType; ++op) {
      v.push_back("NEGOTIATE_" + Upper(OpTypeName(static_cast<OpType>(op))));
    }
    return v;
  }();
  return names[static_cast<size_t>(op)];
}

// The operation span's name; "" for Responses that execute nothing of their own.
const char* OperationName(ResponseType type) {
  switch (type) {
    case ResponseType::kAllreduce: return "ALLREDUCE";
    case ResponseType::kAllgather: return "ALLGATHER";
    case ResponseType::kBroadcast: return "BROADCAST";
    case ResponseType::kReducescatter: return "REDUCESCATTER";
    case ResponseType::kAlltoall: return "ALLTOALL";
    case ResponseType::kBarrier: return "BARRIER";
    case ResponseType::kError:
    case ResponseType::kJoin: return "";
  }
  return "";
}

// Barriers and joins are named "<prefix><n>", a new name each time: one row for all of them,
// keyed by the prefix without its '.'. Null for every other name (its own row).
const char* SharedRow(const std::string& name) {
  if (name.size() < 2 || name[0] != '_' || name[1] != '_') return nullptr;
  static const std::string barrier(kBarrierPrefix, sizeof(kBarrierPrefix) - 2);
  static const std::string join(kJoinPrefix, sizeof(kJoinPrefix) - 2);
  if (name.compare(0, barrier.size() + 1, kBarrierPrefix) == 0) return barrier.c_str();
  if (name.compare(0, join.size() + 1, kJoinPrefix) == 0) return join.c_str();
  return nullptr;
}

// Appends ns as microseconds with three decimals ("1234.567"): what "ts" is in Chrome's
// format. Integer formatting: printf's %f was most of the timeline's cost.
void AppendMicros(std::string* out, int64_t ns) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), ns / 1000);
  *r.ptr++ = '.';
  const int frac = static_cast<int>(ns % 1000);
  *r.ptr++ = static_cast<char>('0' + frac / 100);
  *r.ptr++ = static_cast<char>('0' + frac / 10 % 10);
  *r.ptr++ = static_cast<char>('0' + frac % 10);
  out->append(buf, r.ptr);
}

void AppendInt(std::string* out, int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, r.ptr);
}

// Timelines that are recording, stopped by an atexit handler so the last events reach the
// file when a program exits without kolo_shutdown. Leaked on purpose: it must outlive every
// static destructor that could still stop a timeline.
struct LiveTimelines {
  std::mutex mu;
  std::set<Timeline*> set;
};
LiveTimelines& Live() {
  static LiveTimelines* live = new LiveTimelines;
  return *live;
}

}  // namespace

Timeline::~Timeline() { Stop(); }

Status Timeline::Start(const std::string& path, bool mark_cycles) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Closed before the new file is opened: the same path would be truncated under the old one.
    CloseLocked();
    auto writer = TraceWriter::Open(path);
    if (!writer.ok()) return writer.status();
    writer_ = std::move(writer).value();
    mark_cycles_ = mark_cycles;
    start_ = std::chrono::steady_clock::now();
    last_flush_ = start_;
    enabled_ = true;
  }
  static const bool registered = std::atexit(&Timeline::StopAllAtExit) == 0;
  if (!registered) KOLO_LOG_WARNING("timeline", "cannot register the at-exit flush");
  LiveTimelines& live = Live();
  std::lock_guard<std::mutex> lock(live.mu);
  live.set.insert(this);
  return Status::OK();
}

void Timeline::Stop() {
  {
    LiveTimelines& live = Live();
    std::lock_guard<std::mutex> lock(live.mu);
    live.set.erase(this);
  }
  std::lock_guard<std::mutex> lock(mu_);
  CloseLocked();
}

void Timeline::StopAllAtExit() {
  LiveTimelines& live = Live();
  std::lock_guard<std::mutex> lock(live.mu);
  for (Timeline* t : live.set) {
    std::lock_guard<std::mutex> timeline_lock(t->mu_);
    t->CloseLocked();
  }
  live.set.clear();
}

void Timeline::CloseLocked() {
  if (!writer_) return;
  const int64_t ts = Now();
  for (auto& [name, row] : rows_) CloseAll(row, ts);
  Status s = writer_->Flush();
  if (!s.ok()) {
    KOLO_LOG_ERROR("timeline", "{}", s.ToString());
    writer_->Discard();
  }
  writer_.reset();
  enabled_ = false;
  rows_.clear();
}

int64_t Timeline::Now() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                              start_)
      .count();
}

void Timeline::FlushLocked(bool force) {
  if (!writer_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && writer_->buffered_bytes() < kMaxBufferedBytes &&
      now - last_flush_ < kFlushInterval) {
    return;
  }
  last_flush_ = now;
  Status s = writer_->Flush();
  if (s.ok()) return;
  // The file stays the valid array it was; recording stops rather than retrying every event.
  KOLO_LOG_ERROR("timeline", "{}; the timeline stops", s.ToString());
  writer_->Discard();
  writer_.reset();
  enabled_ = false;
  rows_.clear();
}

Timeline::Row* Timeline::Find(const std::string& name) {
  const char* shared = SharedRow(name);
  auto it = shared ? rows_.find(shared) : rows_.find(name);
  return it == rows_.end() ? nullptr : &it->second;
}

Timeline::Row& Timeline::RowOf(const std::string& tensor) {
  if (Row* row = Find(tensor)) return *row;
  const char* shared = SharedRow(tensor);
  const std::string name = shared ? std::string(shared) : tensor;
  Row& row = rows_[name];
  row.pid = static_cast<int>(rows_.size());
  // Each tensor is a "process"; its name and place come as metadata events.
  const std::string pid = std::to_string(row.pid);
  writer_->Append("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + pid + ",\"tid\":" + pid +
                  ",\"args\":{\"name\":" + JsonString(name) + "}}");
  writer_->Append("{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + pid +
                  ",\"tid\":" + pid + ",\"args\":{\"sort_index\":" + pid + "}}");
  return row;
}

void Timeline::Emit(const Row& row, char phase, std::string_view name, int64_t ts,
                    std::string_view args) {
  // Formatted straight into the writer's buffer.
  std::string& out = writer_->NextEvent();
  out += "{\"ph\":\"";
  out += phase;
  out += "\",\"ts\":";
  AppendMicros(&out, ts);
  // tid = pid: a (pid, tid) pair per row, since viewers treat tids as unique in the trace.
  out += ",\"pid\":";
  AppendInt(&out, row.pid);
  out += ",\"tid\":";
  AppendInt(&out, row.pid);
  if (!name.empty()) {
    out += ",\"name\":";
    AppendJsonString(&out, name);
  }
  if (phase == 'X') out += ",\"dur\":0";
  if (!args.empty()) {
    out += ",\"args\":";
    out += args;
  }
  out += '}';
}

void Timeline::OpenNegotiation(Row& row, OpType op, int64_t ts) {
  if (row.negotiating) return;
  Emit(row, 'B', NegotiateName(op), ts);
  row.negotiating = true;
  row.marked.clear();
}

void Timeline::CloseAll(Row& row, int64_t ts, std::string_view args) {
  // Innermost first; `args` go on the outermost span's end (viewers merge them into it).
  // Leaves in_flight alone: that is the submission's state, not a span.
  int left = row.queued + row.negotiating + row.activity + row.running;
  auto end = [&](bool& flag) {
    if (!flag) return;
    Emit(row, 'E', {}, ts, --left == 0 ? args : std::string_view());
    flag = false;
  };
  end(row.queued);
  end(row.negotiating);
  end(row.activity);
  end(row.running);
}

void Timeline::Submitted(const Request& request) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!writer_) return;
  const int64_t ts = Now();
  Row& row = RowOf(request.name);
  if (row.in_flight) return;  // a second submission of a name in flight: the queue refuses it
  row.in_flight = true;
  if (row.running || row.activity) CloseAll(row, ts);
  OpenNegotiation(row, request.op, ts);
  if (!row.queued) {
    Emit(row, 'B', "QUEUE", ts);
    row.queued = true;
  }
  FlushLocked(false);
}

void Timeline::Dequeued(const std::vector<const Request*>& requests) {
  if (!enabled() || requests.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!writer_) return;
  const int64_t ts = Now();
  for (const Request* r : requests) {
    Row* row = Find(r->name);
    if (!row || !row->queued) continue;
    Emit(*row, 'E', {}, ts);
    row->queued = false;
  }
}

void Timeline::RequestArrived(const Request& request, int rank) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!writer_) return;
  const int64_t ts = Now();
  Row& row = RowOf(request.name);
  if (row.running) return;  // cannot happen: rank 0 negotiates only between executions
  OpenNegotiation(row, request.op, ts);
  if (rank < 0) return;
  const size_t r = static_cast<size_t>(rank);
  if (r >= row.marked.size()) row.marked.resize(r + 1, false);
  if (row.marked[r]) return;
  row.marked[r] = true;
  std::string args = "{\"rank\":" + std::to_string(rank);
  if (!request.refused.empty()) args += ",\"refused\":" + JsonString(request.refused);
  args += '}';
  Emit(row, 'X', std::to_string(rank), ts, args);
}

void Timeline::Negotiated(const std::vector<Response>& responses) {
  if (!enabled() || responses.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!writer_) return;
  const int64_t ts = Now();
  static const std::vector<std::string> join = {kJoinPrefix};
  for (const Response& r : responses) {
    // The join Response names no tensor: it ends the joins' negotiation.
    for (const std::string& name : r.type == ResponseType::kJoin ? join : r.names) {
      Row* found = Find(name);
      if (!found) continue;
      Row& row = *found;
      if (row.queued) {
        Emit(row, 'E', {}, ts);
        row.queued = false;
      }
      if (row.negotiating) {
        Emit(row, 'E', {}, ts,
             r.type == ResponseType::kError ? "{\"error\":" + JsonString(r.error) + "}" : "");
        row.negotiating = false;
      }
    }
  }
  FlushLocked(false);
}

void Timeline::ExecutionStarted(const Response& response) {
  if (!enabled()) return;
  const char* op = OperationName(response.type);
  if (!*op) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!writer_) return;
  const int64_t ts = Now();
  const std::string args =
      response.names.size() > 1
          ? "{\"fused_tensors\":" + std::to_string(response.names.size()) + "}"
          : "";
  for (const std::string& name : response.names) {
    Row& row = RowOf(name);
    if (row.running) continue;
    if (row.queued || row.negotiating) CloseAll(row, ts);  // its Negotiated came before Start
    Emit(row, 'B', op, ts, args);
    row.running = true;
  }
}

void Timeline::ActivityStarted(const std::vector<std::string>& names, size_t first, size_t last,
                               std::string_view activity) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!writer_) return;
  const int64_t ts = Now();
  for (size_t i = first; i <= last && i < names.size(); ++i) {
    Row* row = Find(names[i]);
    if (!row || !row->running || row->activity) continue;
    Emit(*row, 'B', activity, ts);
    row->activity = true;
  }
}

void Timeline::ActivityFinished(const std::vector<std::string>& names, size_t first,
                                size_t last) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!writer_) return;
  const int64_t ts = Now();
  for (size_t i = first; i <= last && i < names.size(); ++i) {
    Row* row = Find(names[i]);
    if (!row || !row->activity) continue;
    Emit(*row, 'E', {}, ts);
    row->activity = false;
  }
}

void Timeline::TensorFinished(const Request& request, const Status& status) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!writer_) return;
  Row* row = Find(request.name);
  if (!row) return;
  std::string args = "{\"dtype\":\"" + std::string(DataTypeName(request.dtype)) +
                     "\",\"shape\":\"" + ShapeString(request.shape) + "\"";
  if (!status.ok()) args += ",\"error\":" + JsonString(status.message());
  args += '}';
  CloseAll(*row, Now(), args);
  row->in_flight = false;
  FlushLocked(false);
}

void Timeline::ExecutionFinished(const Response& response) {
  if (!enabled() || !*OperationName(response.type)) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!writer_) return;
  const int64_t ts = Now();
  for (const std::string& name : response.names) {
    // Only the operation's own spans: a tensor finished earlier in this Response may have
    // been submitted again already, and its new negotiation is open on the same row.
    Row* found = Find(name);
    if (!found || !found->running) continue;
    Row& row = *found;
    if (row.activity) Emit(row, 'E', {}, ts);
    Emit(row, 'E', {}, ts);
    row.activity = row.running = false;
  }
  FlushLocked(false);
}

void Timeline::CycleStarted() {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!writer_) return;
  if (mark_cycles_) {
    std::string& out = writer_->NextEvent();
    out += "{\"ph\":\"i\",\"ts\":";
    AppendMicros(&out, Now());
    out += ",\"pid\":0,\"tid\":0,\"name\":\"CYCLE_START\",\"s\":\"g\"}";
  }
  FlushLocked(false);
}

void TimelineStages::StageStarted(Stage stage, size_t first, size_t last) {
  switch (stage) {
    case Stage::kPack:
      timeline_.ActivityStarted(names_, first, last, "MEMCPY_IN_FUSION_BUFFER");
      return;
    case Stage::kReduce:
      timeline_.ActivityStarted(names_, first, last, collective_);
      return;
    case Stage::kUnpack:
      timeline_.ActivityStarted(names_, first, last, "MEMCPY_OUT_FUSION_BUFFER");
      return;
  }
}

void TimelineStages::StageFinished(Stage, size_t first, size_t last) {
  timeline_.ActivityFinished(names_, first, last);
}

}  // namespace kolo
