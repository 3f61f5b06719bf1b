#include "base/check.h"

#include <cstdio>
#include <cstdlib>

#include "base/logging.h"

namespace kolo {
namespace internal {

CheckFailure::CheckFailure(const char* file, int line, const char* condition) {
  out_ << file << ":" << line << ": check failed: " << condition;
}

CheckFailure::~CheckFailure() {
  const std::string message = out_.str();
  LogMessage(LogLevel::kFatal, "check", message);
  // Also straight to stderr: the logger may be what is broken.
  std::fprintf(stderr, "kolo: %s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace internal
}  // namespace kolo
