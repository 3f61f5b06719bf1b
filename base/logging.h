// Logging with the prefix "[host:pid rank r/n subsystem]", level from KOLO_LOG_LEVEL
// (trace|debug|info|warning|error|fatal; default warning). Backed by spdlog (stderr).
#ifndef KOLO_BASE_LOGGING_H_
#define KOLO_BASE_LOGGING_H_

#include <spdlog/fmt/fmt.h>

#include <string>
#include <string_view>

#include "base/status.h"

namespace kolo {

enum class LogLevel { kTrace = 0, kDebug, kInfo, kWarning, kError, kFatal };

// Parses "trace".."fatal" (case-insensitive, "warn" accepted too).
StatusOr<LogLevel> ParseLogLevel(std::string_view text);

// Applies a level and the time-stamp choice to kolo's logger. Thread-safe.
void ConfigureLogging(LogLevel level, bool hide_time);
// Sets the "rank r/n" part of the prefix (-1 before init).
void SetLogRank(int rank, int size);
bool LogEnabled(LogLevel level);
void LogMessage(LogLevel level, std::string_view subsystem, std::string_view message);

}  // namespace kolo

#define KOLO_LOG(level, subsystem, ...)                                          \
  do {                                                                           \
    if (::kolo::LogEnabled(level))                                               \
      ::kolo::LogMessage(level, subsystem, fmt::format(__VA_ARGS__));            \
  } while (0)
#define KOLO_LOG_TRACE(sub, ...) KOLO_LOG(::kolo::LogLevel::kTrace, sub, __VA_ARGS__)
#define KOLO_LOG_DEBUG(sub, ...) KOLO_LOG(::kolo::LogLevel::kDebug, sub, __VA_ARGS__)
#define KOLO_LOG_INFO(sub, ...) KOLO_LOG(::kolo::LogLevel::kInfo, sub, __VA_ARGS__)
#define KOLO_LOG_WARNING(sub, ...) KOLO_LOG(::kolo::LogLevel::kWarning, sub, __VA_ARGS__)
#define KOLO_LOG_ERROR(sub, ...) KOLO_LOG(::kolo::LogLevel::kError, sub, __VA_ARGS__)

#endif  // KOLO_BASE_LOGGING_H_
