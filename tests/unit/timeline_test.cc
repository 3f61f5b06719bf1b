// The timeline: its file is valid JSON at every flush and after every way of ending (stop,
// shutdown, no operation at all), and a run in the thread world shows every phase of every
// tensor, well nested, in time order.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "collectives/cuda/device.h"
#include "runtime/trace_writer.h"
#include "tests/harness/submission.h"
#include "unit/json_file.h"
#include "unit/thread_world.h"

namespace kolo {
namespace {

using json = nlohmann::json;
using testing::FastConfig;
using testing::Parse;
using testing::RunRuntimes;
using testing::StartRuntimes;
using testing::TempPath;
using testing::WaitFor;

// One tensor's row: its events in file order.
struct Row {
  std::string name;
  std::vector<json> events;
  // Names of the duration events (B), and of the zero-length marks (X).
  std::multiset<std::string> spans, marks;
};

// Checks what holds for every timeline (times never go back; on every row each E closes a B,
// and after a stop none is left open) and returns the rows by tensor name.
std::map<std::string, Row> CheckWellFormed(const json& trace) {
  std::map<int, Row> by_pid;
  double last_ts = -1;
  for (const json& e : trace) {
    EXPECT_TRUE(e.contains("ph") && e.contains("pid")) << e.dump();
    const std::string ph = e.value("ph", "");
    const int pid = e.value("pid", -1);
    if (ph == "M") {
      if (e["name"] == "process_name") by_pid[pid].name = e["args"]["name"];
      continue;
    }
    EXPECT_TRUE(e["ts"].is_number()) << e.dump();
    const double ts = e["ts"];
    EXPECT_GE(ts, last_ts) << "time goes back at " << e.dump();
    last_ts = ts;
    if (ph == "i") continue;  // cycle marks, global
    EXPECT_EQ(e.value("tid", -1), pid) << e.dump();
    Row& row = by_pid[pid];
    row.events.push_back(e);
    if (ph == "B") row.spans.insert(e["name"].get<std::string>());
    if (ph == "X") row.marks.insert(e["name"].get<std::string>());
  }
  std::map<std::string, Row> rows;
  for (auto& [pid, row] : by_pid) {
    EXPECT_FALSE(row.name.empty()) << "pid " << pid << " has no process_name";
    int depth = 0;
    for (const json& e : row.events) {
      if (e["ph"] == "B") ++depth;
      if (e["ph"] == "E") {
        EXPECT_GT(depth--, 0) << row.name << ": E without B: " << e.dump();
      }
    }
    EXPECT_EQ(depth, 0) << row.name << ": spans left open";
    rows[row.name] = row;
  }
  return rows;
}

// Every rank submits `names` (count floats each), waits for them, and checks the sums.
void RunAllreduces(Runtime& rt, const std::vector<std::string>& names, int64_t count) {
  std::vector<std::vector<float>> in(names.size()), out(names.size());
  std::vector<std::shared_ptr<Handle>> handles;
  for (size_t k = 0; k < names.size(); ++k) {
    in[k].assign(count, static_cast<float>(rt.layout().rank + 1));
    out[k].assign(count, 0.f);
    auto h = rt.Enqueue(testing::FloatSum(names[k], in[k].data(), out[k].data(), count));
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    handles.push_back(*h);
  }
  const int n = rt.layout().size;
  for (size_t k = 0; k < names.size(); ++k) {
    ASSERT_TRUE(WaitFor(*handles[k]).ok()) << names[k];
    if (count > 0) {
      EXPECT_EQ(out[k][0], static_cast<float>(n * (n + 1) / 2)) << names[k];
    }
  }
}

// The same in float16, which always goes through the fusion buffer (widened to float32), alone
// or fused: its copies are there whatever the cycles did. Ones in, the rank count out.
void RunHalfAllreduces(Runtime& rt, const std::vector<std::string>& names, int64_t count) {
  constexpr uint16_t kOne = 0x3C00;
  std::vector<std::vector<uint16_t>> in(names.size(), std::vector<uint16_t>(count, kOne));
  std::vector<std::vector<uint16_t>> out(names.size(), std::vector<uint16_t>(count, 0));
  std::vector<std::shared_ptr<Handle>> handles;
  for (size_t k = 0; k < names.size(); ++k) {
    const Submission s = testing::MakeSubmission(OpType::kAllreduce, names[k], in[k].data(),
                                                 out[k].data(), DataType::kFloat16, {count});
    auto h = rt.Enqueue(s);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    handles.push_back(*h);
  }
  for (size_t k = 0; k < names.size(); ++k) {
    ASSERT_TRUE(WaitFor(*handles[k]).ok()) << names[k];
    EXPECT_NE(out[k][0], 0) << names[k];
  }
}

// ---- the runtime ------------------------------------------------------------------------------

Config TimelineConfig(const std::string& path, bool mark_cycles = false) {
  Config c = FastConfig();
  c.timeline_path = path;
  c.timeline_mark_cycles = mark_cycles;
  // The collective's span is named by its algorithm: pinned, so the cost model's choice for
  // these small tensors (recursive doubling, say) does not change what the tests expect.
  c.allreduce_algo = "mpi";
  return c;
}

// Fixed 20 ms cycles: a rank's burst of submissions lands in one cycle, so the tensors are
// fused into one Response (a lone tensor is reduced in place, without the memcpy phases).
Config FusingConfig(const std::string& path) {
  Config c = TimelineConfig(path);
  c.wake_on_submit = false;
  c.cycle_time_ms = 20;
  return c;
}

// The number of tensors fused with this row's operation (1 when it ran alone).
int FusedWith(const Row& row) {
  for (const json& e : row.events) {
    if (e["ph"] == "B" && e["name"] == "ALLREDUCE") {
      return e.contains("args") ? e["args"].value("fused_tensors", 1) : 1;
    }
  }
  return 0;
}

TEST(Timeline, FusedAllreduceShowsEveryPhase) {
  TempPath path("fused");
  const std::vector<std::string> names = {"grad/a", "grad/b", "grad/\"c\"", "grad/d"};
  RunRuntimes(3, FusingConfig(path.str()), [&](Runtime& rt) { RunAllreduces(rt, names, 100); });
  auto rows = CheckWellFormed(Parse(path.str()));
  int fused = 0;
  for (const std::string& name : names) {
    ASSERT_TRUE(rows.count(name)) << name;
    const Row& row = rows[name];
    for (const char* span : {"NEGOTIATE_ALLREDUCE", "QUEUE", "ALLREDUCE", "ALLREDUCE (mpi)"}) {
      EXPECT_EQ(row.spans.count(span), 1u) << name << " lacks " << span;
    }
    // The copies exist where the fused path made them (a tensor alone in its cycle, which a
    // very slow machine can make, runs in place).
    const unsigned copies = FusedWith(row) > 1 ? 1 : 0;
    fused += copies;
    EXPECT_EQ(row.spans.count("MEMCPY_IN_FUSION_BUFFER"), copies) << name;
    EXPECT_EQ(row.spans.count("MEMCPY_OUT_FUSION_BUFFER"), copies) << name;
    EXPECT_EQ(row.marks, (std::multiset<std::string>{"0", "1", "2"})) << name;
    // The operation's end carries what it was.
    bool described = false;
    for (const json& e : row.events) {
      if (e["ph"] == "E" && e.contains("args") && e["args"].contains("shape")) {
        EXPECT_EQ(e["args"]["shape"], "[100]");
        EXPECT_EQ(e["args"]["dtype"], "float32");
        described = true;
      }
    }
    EXPECT_TRUE(described) << name;
  }
  EXPECT_GE(fused, 2) << "no two of the four tensors were fused";
}

TEST(Timeline, PhasesNestAsDocumented) {
  TempPath path("nesting");
  RunRuntimes(2, TimelineConfig(path.str()),
              [&](Runtime& rt) { RunHalfAllreduces(rt, {"x"}, 10); });
  auto rows = CheckWellFormed(Parse(path.str()));
  // NEGOTIATE( QUEUE ) ALLREDUCE( MEMCPY_IN ALLREDUCE (mpi) MEMCPY_OUT ), marks inside NEGOTIATE.
  std::vector<std::string> shape;
  for (const json& e : rows["x"].events) {
    if (e["ph"] == "X") continue;
    shape.push_back(e["ph"].get<std::string>() +
                    (e.contains("name") ? " " + e["name"].get<std::string>() : ""));
  }
  EXPECT_EQ(shape,
            (std::vector<std::string>{"B NEGOTIATE_ALLREDUCE", "B QUEUE", "E", "E", "B ALLREDUCE",
                                      "B MEMCPY_IN_FUSION_BUFFER", "E", "B ALLREDUCE (mpi)", "E",
                                      "B MEMCPY_OUT_FUSION_BUFFER", "E", "E"}));
  EXPECT_EQ(rows["x"].marks, (std::multiset<std::string>{"0", "1"}));
}

TEST(Timeline, LargeTensorHasOnlyTheCollective) {
  TempPath path("direct");
  Config c = TimelineConfig(path.str());
  c.fusion_direct_bytes = 1024;  // 4 KiB tensors skip the fusion buffer
  RunRuntimes(2, c, [&](Runtime& rt) { RunAllreduces(rt, {"big"}, 1024); });
  auto rows = CheckWellFormed(Parse(path.str()));
  const Row& row = rows["big"];
  EXPECT_EQ(row.spans.count("ALLREDUCE (mpi)"), 1u);
  EXPECT_EQ(row.spans.count("MEMCPY_IN_FUSION_BUFFER"), 0u);
  EXPECT_EQ(row.spans.count("MEMCPY_OUT_FUSION_BUFFER"), 0u);
}

TEST(Timeline, TensorOverSeveralPiecesHasActivitiesPerPiece) {
  TempPath path("pieces");
  Config c = FusingConfig(path.str());
  c.fusion_chunk_bytes = 256;  // 64 elements a piece (float16 travels as float32)
  RunRuntimes(2, c, [&](Runtime& rt) { RunHalfAllreduces(rt, {"p/a", "p/b"}, 100); });
  auto rows = CheckWellFormed(Parse(path.str()));
  // Fused, 200 elements in pieces of 64: a = [0,100) in pieces 0 and 1, b = [100,200) in
  // pieces 1-3. Alone (a slow machine split them), each has two pieces.
  const bool fused = FusedWith(rows["p/a"]) == 2;
  EXPECT_EQ(rows["p/a"].spans.count("ALLREDUCE (mpi)"), 2u);
  EXPECT_EQ(rows["p/b"].spans.count("ALLREDUCE (mpi)"), fused ? 3u : 2u);
  EXPECT_EQ(rows["p/b"].spans.count("MEMCPY_IN_FUSION_BUFFER"), fused ? 3u : 2u);
  EXPECT_EQ(rows["p/b"].spans.count("MEMCPY_OUT_FUSION_BUFFER"), fused ? 3u : 2u);
}

TEST(Timeline, MarkCycles) {
  TempPath path("cycles");
  RunRuntimes(2, TimelineConfig(path.str(), /*mark_cycles=*/true),
              [&](Runtime& rt) { RunAllreduces(rt, {"c"}, 4); });
  int cycles = 0;
  for (const json& e : Parse(path.str())) {
    if (e["ph"] == "i") {
      EXPECT_EQ(e["name"], "CYCLE_START");
      EXPECT_EQ(e["s"], "g");
      ++cycles;
    }
  }
  EXPECT_GT(cycles, 0);
}

TEST(Timeline, NoOperationIsAValidEmptyTimeline) {
  TempPath path("noop");
  RunRuntimes(2, TimelineConfig(path.str()), [](Runtime&) {});
  EXPECT_EQ(Parse(path.str()), json::array());
}

TEST(Timeline, ErrorsAndBarriersHaveTheirRows) {
  TempPath path("errors");
  RunRuntimes(2, TimelineConfig(path.str()), [&](Runtime& rt) {
    std::vector<float> in(4, 1.f), out(4);
    // Shapes differ between the ranks: an error Response.
    auto h =
        rt.Enqueue(testing::FloatSum("bad", in.data(), out.data(), rt.layout().rank == 0 ? 4 : 3));
    ASSERT_TRUE(h.ok());
    EXPECT_FALSE(WaitFor(**h).ok());
    ASSERT_TRUE(rt.Barrier().ok());
    ASSERT_TRUE(rt.Barrier().ok());
  });
  auto rows = CheckWellFormed(Parse(path.str()));
  bool error_shown = false;
  for (const json& e : rows["bad"].events) {
    if (e.contains("args") && e["args"].contains("error")) {
      EXPECT_NE(e["args"]["error"].get<std::string>().find("shape mismatch"), std::string::npos);
      error_shown = true;
    }
  }
  EXPECT_TRUE(error_shown);
  EXPECT_EQ(rows["bad"].spans.count("ALLREDUCE"), 0u);  // nothing ran
  // Both barriers on one row.
  ASSERT_TRUE(rows.count("__kolo_barrier"));
  EXPECT_EQ(rows["__kolo_barrier"].spans.count("BARRIER"), 2u);
  EXPECT_EQ(rows["__kolo_barrier"].spans.count("NEGOTIATE_BARRIER"), 2u);
}

// CUDA-tensor allgather, alltoall and reducescatter complete in the finaliser's callback, not
// when the background thread has enqueued them: their spans end there, with the handle's
// outcome. Without a device each fails, and its operation span is closed by that failure
// (the error in the closing event), not left open for the final Stop to close.
TEST(Timeline, DeviceOperationsEndTheirSpansWhenTheirHandlesComplete) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  TempPath path("device");
  RunRuntimes(2, TimelineConfig(path.str()), [&](Runtime& rt) {
    std::vector<float> in(4, 1.f);
    for (OpType op : {OpType::kAllgather, OpType::kAlltoall, OpType::kReducescatter}) {
      Submission s;
      s.op = op;
      s.name = "dev_" + std::string(OpTypeName(op));
      s.input = in.data();
      s.dtype = DataType::kFloat32;
      s.shape = {4};
      s.device = 0;
      auto h = rt.Enqueue(s);
      ASSERT_TRUE(h.ok()) << h.status().ToString();
      EXPECT_FALSE(WaitFor(**h).ok());
    }
  });
  auto rows = CheckWellFormed(Parse(path.str()));
  for (const char* span : {"ALLGATHER", "ALLTOALL", "REDUCESCATTER"}) {
    std::string name = span;
    for (char& c : name) c = static_cast<char>(std::tolower(c));
    const Row& row = rows["dev_" + name];
    EXPECT_EQ(row.spans.count(span), 1u) << name << ": the operation ran";
    bool closed_with_error = false;
    for (const json& e : row.events) {
      if (e["ph"] == "E" && e.contains("args") && e["args"].contains("error")) {
        EXPECT_NE(e["args"]["error"].get<std::string>().find("cuda:0"), std::string::npos)
            << e.dump();
        closed_with_error = true;
      }
    }
    EXPECT_TRUE(closed_with_error) << name << ": its span was not ended by its completion";
  }
}

// The hooks in the order of a fused Response whose first tensor is submitted again before the
// Response has finished (the application waits for it alone): its new negotiation is not
// ended by the end of the old Response.
TEST(Timeline, ResubmissionDuringAFusedResponseKeepsItsNegotiation) {
  TempPath path("resubmit");
  Timeline timeline;
  ASSERT_TRUE(timeline.Start(path.str(), false).ok());
  Request a, b;
  a.name = "a";
  b.name = "b";
  Response fused;
  fused.names = {"a", "b"};
  Response again;
  again.names = {"a"};
  timeline.Submitted(a);
  timeline.Submitted(b);
  timeline.Dequeued({&a, &b});
  timeline.RequestArrived(a, 0);
  timeline.RequestArrived(b, 0);
  timeline.Negotiated({fused});
  timeline.ExecutionStarted(fused);
  timeline.TensorFinished(a, Status::OK());
  timeline.Submitted(a);  // the application's next step
  timeline.TensorFinished(b, Status::OK());
  timeline.ExecutionFinished(fused);
  timeline.Dequeued({&a});
  timeline.RequestArrived(a, 0);
  timeline.Negotiated({again});
  timeline.ExecutionStarted(again);
  timeline.TensorFinished(a, Status::OK());
  timeline.ExecutionFinished(again);
  timeline.Stop();
  auto rows = CheckWellFormed(Parse(path.str()));
  EXPECT_EQ(rows["a"].spans.count("NEGOTIATE_ALLREDUCE"), 2u);
  EXPECT_EQ(rows["a"].spans.count("QUEUE"), 2u);
  EXPECT_EQ(rows["a"].spans.count("ALLREDUCE"), 2u);
  EXPECT_EQ(rows["a"].marks.size(), 2u);
  EXPECT_EQ(rows["b"].spans.count("ALLREDUCE"), 1u);
}

// The NEGOTIATE_* spans of a row, each with its ready marks: rank -> the marks' times (ms).
std::vector<std::map<int, std::vector<double>>> MarksPerNegotiation(const Row& row) {
  std::vector<std::map<int, std::vector<double>>> spans;
  std::vector<std::string> open;  // names of the open spans, outermost first
  for (const json& e : row.events) {
    if (e["ph"] == "B") {
      open.push_back(e["name"]);
      if (open.back().rfind("NEGOTIATE_", 0) == 0) spans.emplace_back();
    } else if (e["ph"] == "E") {
      if (!open.empty()) open.pop_back();
    } else if (e["ph"] == "X") {
      const bool inside = !open.empty() && open.front().rfind("NEGOTIATE_", 0) == 0;
      EXPECT_TRUE(inside) << row.name << ": a mark outside a negotiation: " << e.dump();
      if (inside) spans.back()[std::stoi(e["name"].get<std::string>())].push_back(
          e["ts"].get<double>() / 1000);
    }
  }
  return spans;
}

// A cached step skips the coordinator; the marks come from the ranks' hits. Rank 1 submits the
// third step late: its hit shows up that much later, after the others' (which waited, their
// bits set, for about 200 cycles: still one mark each).
TEST(Timeline, CachedStepsShowEveryRanksReadyMark) {
  constexpr int kLateMs = 100;
  for (int n : {2, 3}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    TempPath path("cached");
    std::vector<NegotiationStats> stats(n);
    RunRuntimes(n, TimelineConfig(path.str()), [&](Runtime& rt) {
      RunAllreduces(rt, {"t"}, 4);  // negotiated by the coordinator, then cached
      RunAllreduces(rt, {"t"}, 4);  // a cached step
      if (rt.layout().rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(kLateMs));
      RunAllreduces(rt, {"t"}, 4);  // a cached step, rank 1 late
      stats[rt.layout().rank] = rt.negotiation_stats();
    });
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(stats[r].cache_hits, 2u) << "rank " << r << ": steps 2 and 3 were not cached";
    }
    auto rows = CheckWellFormed(Parse(path.str()));
    ASSERT_TRUE(rows.count("t"));
    auto spans = MarksPerNegotiation(rows["t"]);
    ASSERT_EQ(spans.size(), 3u);
    for (size_t step = 0; step < spans.size(); ++step) {
      ASSERT_EQ(spans[step].size(), static_cast<size_t>(n)) << "step " << step;
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(spans[step][r].size(), 1u) << "step " << step << ", rank " << r;
      }
    }
    const auto& late = spans[2];
    for (int r = 0; r < n; ++r) {
      if (r == 1) continue;
      EXPECT_GT(late.at(1)[0], late.at(r)[0]) << "rank " << r;
      // Well after the others: allow half the delay for scheduling on a loaded machine.
      EXPECT_GE(late.at(1)[0] - late.at(r)[0], kLateMs / 2.0) << "rank " << r;
    }
  }
}

// A rank's hit that goes the slow way after all (invalidated, evicted, held too long) reaches
// the coordinator too: its first mark stays, the second is dropped; a new negotiation marks
// again.
TEST(Timeline, OneMarkPerRankPerNegotiation) {
  TempPath path("dedup");
  Timeline timeline;
  ASSERT_TRUE(timeline.Start(path.str(), false).ok());
  Request a;
  a.name = "a";
  Response done;
  done.names = {"a"};
  timeline.RequestArrived(a, 1);
  timeline.RequestArrived(a, 0);
  timeline.RequestArrived(a, 1);
  timeline.Negotiated({done});
  timeline.RequestArrived(a, 1);
  timeline.Negotiated({done});
  timeline.Stop();
  auto rows = CheckWellFormed(Parse(path.str()));
  auto spans = MarksPerNegotiation(rows["a"]);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].size(), 2u);
  EXPECT_EQ(spans[0][1].size(), 1u);
  EXPECT_EQ(spans[0][0].size(), 1u);
  EXPECT_EQ(spans[1].size(), 1u);
  EXPECT_EQ(spans[1][1].size(), 1u);
}

TEST(Timeline, StartAndStopAtRunTime) {
  TempPath first("runtime-1"), second("runtime-2");
  auto runtimes = StartRuntimes(2, FastConfig());
  ASSERT_EQ(runtimes.size(), 2u);
  auto run_all = [&](const std::vector<std::string>& names) {
    std::vector<std::thread> threads;
    for (auto& rt : runtimes)
      threads.emplace_back([&, r = rt.get()] { RunAllreduces(*r, names, 8); });
    for (auto& t : threads) t.join();
  };
  run_all({"before"});  // not recorded
  ASSERT_TRUE(runtimes[0]->StartTimeline(first.str(), false).ok());
  // Only rank 0 writes: elsewhere it is a no-op, whatever the path.
  EXPECT_TRUE(runtimes[1]->StartTimeline("/nonexistent-kolo-dir/t.json", false).ok());
  run_all({"during"});
  // Starting again switches files; the first is closed, complete.
  ASSERT_TRUE(runtimes[0]->StartTimeline(second.str(), false).ok());
  run_all({"second"});
  runtimes[0]->StopTimeline();
  run_all({"after"});  // not recorded
  auto rows = CheckWellFormed(Parse(first.str()));
  EXPECT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows.count("during"), 1u);
  EXPECT_EQ(rows["during"].spans.count("ALLREDUCE"), 1u);
  rows = CheckWellFormed(Parse(second.str()));
  EXPECT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows.count("second"), 1u);
  runtimes[0]->StopTimeline();  // stopping twice is harmless
  for (auto& rt : runtimes) rt->Shutdown();
}

TEST(Timeline, StopWhileOperationsWaitClosesTheirSpans) {
  TempPath path("midflight");
  auto runtimes = StartRuntimes(2, TimelineConfig(path.str()));
  ASSERT_EQ(runtimes.size(), 2u);
  std::vector<float> in(4, 1.f), out(4);
  // Only rank 0 submits: the tensor stays in negotiation.
  auto h = runtimes[0]->Enqueue(testing::FloatSum("waiting", in.data(), out.data(), 4));
  ASSERT_TRUE(h.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  runtimes[0]->StopTimeline();
  auto rows = CheckWellFormed(Parse(path.str()));  // balanced: Stop closed NEGOTIATE
  EXPECT_EQ(rows["waiting"].spans.count("NEGOTIATE_ALLREDUCE"), 1u);
  EXPECT_EQ(rows["waiting"].marks, (std::multiset<std::string>{"0"}));
  for (auto& rt : runtimes) rt->Shutdown();
}

TEST(Timeline, UnwritablePathFailsTheStart) {
  auto control = std::make_shared<LoopbackWorld>(1, std::chrono::seconds(5));
  auto data = std::make_shared<LoopbackWorld>(1, std::chrono::seconds(5));
  Runtime rt(TimelineConfig("/nonexistent-kolo-dir/t.json"), RankLayout{},
             std::make_unique<LoopbackCommunicator>(control, 0),
             std::make_unique<LoopbackCommunicator>(data, 0));
  Status s = rt.Start();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("KOLO_TIMELINE"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("/nonexistent-kolo-dir/t.json"), std::string::npos) << s.message();
  // At run time too, and the runtime keeps working without one.
  Status at_run_time = rt.StartTimeline("/nonexistent-kolo-dir/t.json", false);
  EXPECT_EQ(at_run_time.code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kolo
