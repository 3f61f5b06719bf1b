// The timeline's file writer: the file is valid JSON after every flush, names of any bytes are
// escaped, an unwritable path is a clear error, a forked child never writes, and SIGINT never
// cuts a flush in half.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "runtime/trace_writer.h"
#include "unit/json_file.h"

namespace kolo {
namespace {

using json = nlohmann::json;
using testing::Parse;
using testing::TempPath;

TEST(TraceWriter, EmptyTimelineIsAnEmptyArray) {
  TempPath path("empty");
  {
    auto w = TraceWriter::Open(path.str());
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    EXPECT_EQ(Parse(path.str()), json::array());  // valid while open, too
  }
  EXPECT_EQ(Parse(path.str()), json::array());
}

TEST(TraceWriter, ValidAfterEveryFlush) {
  TempPath path("flush");
  auto w = TraceWriter::Open(path.str());
  ASSERT_TRUE(w.ok());
  size_t written = 0;
  for (int round = 0; round < 5; ++round) {
    // Enough to cross pages, so the tail moves between them.
    for (int i = 0; i < 100 * round; ++i) {
      (*w)->Append("{\"ph\":\"i\",\"ts\":" + std::to_string(written++) + ",\"pid\":0}");
    }
    ASSERT_TRUE((*w)->Flush().ok());
    json j = Parse(path.str());
    EXPECT_EQ(j.size(), written);
    if (written) {
      EXPECT_EQ(j.back()["ts"], written - 1);
    }
  }
}

TEST(TraceWriter, UnwritablePathIsAClearError) {
  auto w = TraceWriter::Open("/nonexistent-kolo-dir/t.json");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(w.status().message().find("'/nonexistent-kolo-dir/t.json'"), std::string::npos)
      << w.status().message();
  EXPECT_NE(w.status().message().find("No such file or directory"), std::string::npos)
      << w.status().message();
  EXPECT_FALSE(TraceWriter::Open("").ok());
}

TEST(TraceWriter, JsonStringEscapesAnyName) {
  const std::string names[] = {
      "plain",        "q\"uote",   "back\\slash", "new\nline\ttab", std::string("nul\0byte", 8),
      "\x01\x1f\x7f", "ünïcødé €𝄞"};
  for (const std::string& name : names) {
    json j = json::parse(JsonString(name));
    EXPECT_EQ(j.get<std::string>(), name);
  }
  // Invalid UTF-8 (a lone continuation byte, a cut sequence, an overlong, a surrogate) is
  // replaced, byte by byte, so the file stays parseable.
  EXPECT_EQ(json::parse(JsonString("a\x80z")).get<std::string>(), "a\xEF\xBF\xBDz");
  EXPECT_EQ(json::parse(JsonString("\xE2\x82")).get<std::string>(), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_FALSE(json::parse(JsonString("\xC0\xAF")).get<std::string>().empty());
  EXPECT_FALSE(json::parse(JsonString("\xED\xA0\x80")).get<std::string>().empty());
}

// A forked child (a data loader's worker) shares the file but not the writer's offset: only
// the process that opened it writes.
TEST(TraceWriter, ForkedChildNeverWrites) {
  TempPath path("fork");
  auto w = TraceWriter::Open(path.str());
  ASSERT_TRUE(w.ok());
  (*w)->Append("{\"ph\":\"i\",\"ts\":1,\"pid\":0}");
  ASSERT_TRUE((*w)->Flush().ok());
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    (*w)->Append("{\"ph\":\"i\",\"ts\":2,\"pid\":0,\"name\":\"child\"}");
    ::_exit((*w)->Flush().ok() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  (*w)->Append("{\"ph\":\"i\",\"ts\":3,\"pid\":0}");
  ASSERT_TRUE((*w)->Flush().ok());
  json j = Parse(path.str());
  ASSERT_EQ(j.size(), 2u) << j.dump();
  EXPECT_EQ(j[1]["ts"], 3);
}

// A write cut by a fatal signal would leave the file without its closing bracket: the writer
// defers SIGINT while it writes. The child flushes megabytes at a time, so an unprotected write
// is cut in most trials.
TEST(TraceWriter, SigintNeverCutsAFlush) {
  for (int trial = 0; trial < 6; ++trial) {
    TempPath path("sigint");
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      // A program that handles nothing: SIGINT kills it (ctest may start us with it ignored).
      // Not reset otherwise: the writer's deferral may already be installed (inherited).
      struct sigaction current {};
      sigaction(SIGINT, nullptr, &current);
      if (current.sa_handler == SIG_IGN) std::signal(SIGINT, SIG_DFL);
      auto w = TraceWriter::Open(path.str());
      if (!w.ok()) ::_exit(3);
      const std::string event =
          "{\"ph\":\"i\",\"ts\":1,\"pid\":0,\"args\":{\"pad\":\"" + std::string(150, 'x') + "\"}}";
      while (true) {
        for (int i = 0; i < 20000; ++i) (*w)->Append(event);
        if (!(*w)->Flush().ok()) ::_exit(4);
      }
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (true) {
      std::ifstream f(path.str(), std::ios::ate | std::ios::binary);
      if (f && f.tellg() > (1 << 20)) break;
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the child never wrote 1 MiB";
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(700 * trial));
    ::kill(child, SIGINT);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << "status " << status;
    EXPECT_FALSE(Parse(path.str()).empty()) << "trial " << trial;
  }
}

}  // namespace
}  // namespace kolo
