// GoogleTest main for the tier-2 suites under mpirun.
//
//  - MPI_Init_thread(MPI_THREAD_MULTIPLE), then kolo_init() once for the binary (tests may shut
//    kolo down and initialise it again; they leave it initialised).
//  - Only rank 0 prints gtest's normal output; every other rank prints its own failures, prefixed
//    with its rank, on stderr. After every test the ranks' verdicts are gathered and rank 0 says
//    which ranks failed it.
//  - The result is combined with MPI_Allreduce(MAX): if any rank failed, every rank exits 1.
//  - A watchdog thread per rank prints "rank r: test X still running after N s" every
//    KOLO_TEST_WARN_S (30 s) and calls MPI_Abort after KOLO_TEST_WATCHDOG_S (120 s), so a hang
//    fails fast instead of hanging ctest. WaitHandle gives up earlier, at KOLO_TEST_WAIT_S (60 s)
//    into a test, so a lost operation fails its test and the others still run.
#include <kolo/kolo.h>
#include <mpi.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace {

double EnvSeconds(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  return (end != v && d > 0) ? d : fallback;
}

// What this rank is doing now, for the watchdog.
class Activity {
 public:
  void Set(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    what_ = what;
    since_ = std::chrono::steady_clock::now();
    warned_s_ = 0;
  }
  // Returns the activity and how long it has run.
  std::string Get(double* seconds, double* warned_s) {
    std::lock_guard<std::mutex> lock(mu_);
    *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - since_).count();
    *warned_s = warned_s_;
    return what_;
  }
  void MarkWarned(double s) {
    std::lock_guard<std::mutex> lock(mu_);
    warned_s_ = s;
  }

 private:
  std::mutex mu_;
  std::string what_ = "start-up";
  std::chrono::steady_clock::time_point since_ = std::chrono::steady_clock::now();
  double warned_s_ = 0;
};

Activity g_activity;

class Watchdog {
 public:
  Watchdog(int rank, double warn_s, double abort_s)
      : rank_(rank), warn_s_(warn_s), abort_s_(abort_s), thread_([this] { Run(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::milliseconds(500), [this] { return stop_; })) {
      double seconds = 0, warned = 0;
      const std::string what = g_activity.Get(&seconds, &warned);
      if (seconds >= abort_s_) {
        std::fprintf(stderr,
                     "rank %d: test %s still running after %.0f s: watchdog calls MPI_Abort\n",
                     rank_, what.c_str(), seconds);
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 3);
      }
      if (seconds >= warned + warn_s_) {
        std::fprintf(stderr, "rank %d: test %s still running after %.0f s\n", rank_,
                     what.c_str(), seconds);
        std::fflush(stderr);
        g_activity.MarkWarned(seconds);
      }
    }
  }

  const int rank_;
  const double warn_s_, abort_s_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

std::string FullName(const ::testing::TestInfo& info) {
  return std::string(info.test_suite_name()) + "." + info.name();
}

// Installed on every rank: keeps the watchdog informed, sets the per-test wait deadline, prints
// the failures of ranks other than 0 (whose gtest printer is removed) and gathers the per-test
// verdicts on rank 0.
class MpiListener : public ::testing::EmptyTestEventListener {
 public:
  MpiListener(int rank, int size, double wait_s) : rank_(rank), size_(size), wait_s_(wait_s) {}

  void OnTestStart(const ::testing::TestInfo& info) override {
    current_test_ = FullName(info);
    g_activity.Set(current_test_);
    kolo_test::SetTestDeadlineFromNow(wait_s_);
  }

  // Called with gtest's internal mutex held: must not call back into UnitTest (such as
  // current_test_info()), hence the name kept from OnTestStart.
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (rank_ == 0 || !result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure in %s\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 current_test_.c_str(), result.message());
    std::fflush(stderr);
  }

  void OnTestEnd(const ::testing::TestInfo& info) override {
    const std::string name = FullName(info);
    g_activity.Set(name + " (gathering the verdicts of all ranks after it)");
    int failed = info.result()->Failed() ? 1 : 0;
    std::vector<int> all(rank_ == 0 ? size_ : 1, 0);
    MPI_Gather(&failed, 1, MPI_INT, all.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank_ == 0) {
      std::string ranks;
      for (int r = 1; r < size_; ++r) {
        if (all[r]) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
      }
      if (!ranks.empty()) {
        std::fprintf(stdout, "[  RANKS   ] %s failed on rank(s) %s (see their stderr)\n",
                     name.c_str(), ranks.c_str());
        std::fflush(stdout);
        failed_elsewhere_.push_back(name + " on rank(s) " + ranks);
      }
    }
    g_activity.Set("between tests (after " + name + ")");
  }

  void OnTestProgramEnd(const ::testing::UnitTest&) override {
    if (rank_ != 0 || failed_elsewhere_.empty()) return;
    std::fprintf(stdout, "[  RANKS   ] %zu test(s) failed on other ranks:\n",
                 failed_elsewhere_.size());
    for (const std::string& s : failed_elsewhere_) std::fprintf(stdout, "[  RANKS   ]   %s\n", s.c_str());
    std::fflush(stdout);
  }

 private:
  const int rank_, size_;
  const double wait_s_;
  std::string current_test_ = "(outside tests)";
  std::vector<std::string> failed_elsewhere_;
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "MPI_Init_thread failed\n");
    return 1;
  }
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (provided < MPI_THREAD_MULTIPLE) {
    std::fprintf(stderr, "rank %d: MPI provides thread level %d, the suites need MPI_THREAD_MULTIPLE\n",
                 rank, provided);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  ::testing::InitGoogleTest(&argc, argv);
  // Every rank must run the same tests in the same order (they are collective): with
  // --gtest_shuffle, all ranks use rank 0's seed (gtest would otherwise pick one per process).
  {
    int seed = GTEST_FLAG_GET(random_seed);
    if (rank == 0 && seed == 0) {
      seed = static_cast<int>(std::chrono::system_clock::now().time_since_epoch().count() % 99998) + 1;
    }
    MPI_Bcast(&seed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    GTEST_FLAG_SET(random_seed, seed);
  }
  ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new MpiListener(rank, size, EnvSeconds("KOLO_TEST_WAIT_S", 60)));

  int local_failed = 0;
  {
    Watchdog watchdog(rank, EnvSeconds("KOLO_TEST_WARN_S", 30),
                      EnvSeconds("KOLO_TEST_WATCHDOG_S", 120));
    g_activity.Set("kolo_init (before the tests)");
    const kolo_status_t init = kolo_init();
    if (init != KOLO_SUCCESS) {
      std::fprintf(stderr, "rank %d: kolo_init failed: %s: %s\n", rank, kolo_status_string(init),
                   kolo_last_error());
      local_failed = 1;
    }
    int any_init_failed = 0;
    g_activity.Set("MPI_Allreduce of the kolo_init results");
    MPI_Allreduce(&local_failed, &any_init_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_init_failed == 0) {
      local_failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
      g_activity.Set("MPI_Barrier before the final kolo_shutdown");
      MPI_Barrier(MPI_COMM_WORLD);
      g_activity.Set("kolo_shutdown (after the tests)");
      kolo_shutdown();
    } else {
      local_failed = 1;
    }
    g_activity.Set("MPI_Allreduce of the test results");
    int any_failed = 0;
    MPI_Allreduce(&local_failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && any_failed && !local_failed) {
      std::fprintf(stdout, "[  RANKS   ] rank 0 passed, but other ranks failed: exit 1\n");
      std::fflush(stdout);
    }
    local_failed = any_failed;
  }
  MPI_Finalize();
  return local_failed ? 1 : 0;
}
