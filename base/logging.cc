#include "base/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <mutex>

#include "base/ascii.h"
#include "base/host_name.h"

namespace kolo {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kWarning)};
std::atomic<int> g_rank{-1};
std::atomic<int> g_size{-1};

spdlog::logger& Logger() {
  // Own logger (not spdlog's default) so an application's spdlog settings stay its own.
  // Never destroyed: kolo's background thread may still log while the process exits (a script
  // that ends on a peer's failure without kolo_shutdown), after static destructors have run; a
  // destroyed logger there crashed the exiting process.
  static spdlog::logger* const logger = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    auto* l = new spdlog::logger("kolo", sink);
    l->set_level(spdlog::level::trace);
    l->set_pattern("%Y-%m-%d %H:%M:%S.%e %v");
    return l;
  }();
  return *logger;
}

spdlog::level::level_enum ToSpd(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace: return spdlog::level::trace;
    case LogLevel::kDebug: return spdlog::level::debug;
    case LogLevel::kInfo: return spdlog::level::info;
    case LogLevel::kWarning: return spdlog::level::warn;
    case LogLevel::kError: return spdlog::level::err;
    case LogLevel::kFatal: return spdlog::level::critical;
  }
  return spdlog::level::info;
}

std::string_view LevelTag(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace: return "T";
    case LogLevel::kDebug: return "D";
    case LogLevel::kInfo: return "I";
    case LogLevel::kWarning: return "W";
    case LogLevel::kError: return "E";
    case LogLevel::kFatal: return "F";
  }
  return "?";
}

}  // namespace

StatusOr<LogLevel> ParseLogLevel(std::string_view text) {
  const std::string t = AsciiLower(text);
  if (t == "trace") return LogLevel::kTrace;
  if (t == "debug") return LogLevel::kDebug;
  if (t == "info") return LogLevel::kInfo;
  if (t == "warning" || t == "warn") return LogLevel::kWarning;
  if (t == "error") return LogLevel::kError;
  if (t == "fatal") return LogLevel::kFatal;
  return InvalidArgumentError("unknown log level '" + std::string(text) +
                              "' (expected trace, debug, info, warning, error or fatal)");
}

void ConfigureLogging(LogLevel level, bool hide_time) {
  g_level = static_cast<int>(level);
  Logger().set_pattern(hide_time ? "%v" : "%Y-%m-%d %H:%M:%S.%e %v");
}

void SetLogRank(int rank, int size) {
  g_rank = rank;
  g_size = size;
}

bool LogEnabled(LogLevel level) { return static_cast<int>(level) >= g_level.load(); }

void LogMessage(LogLevel level, std::string_view subsystem, std::string_view message) {
  // Never destroyed, as Logger() says why.
  static const std::string* const host = new std::string(HostName());
  static const int pid = static_cast<int>(getpid());
  Logger().log(ToSpd(level), "{} [{}:{} rank {}/{} {}] {}", LevelTag(level), *host, pid,
               g_rank.load(), g_size.load(), subsystem, message);
}

}  // namespace kolo
