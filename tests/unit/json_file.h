// Timeline test helpers: a temporary file path that cleans up after itself, and the file read
// back as JSON (a parse error fails the test with the file's tail).
#ifndef KOLO_TESTS_UNIT_JSON_FILE_H_
#define KOLO_TESTS_UNIT_JSON_FILE_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace kolo {
namespace testing {

using json = nlohmann::json;

// A fresh path under the temporary directory, removed with the object.
class TempPath {
 public:
  explicit TempPath(const std::string& what) {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir && *dir ? dir : "/tmp") + "/kolo-timeline-" + what + "-" +
            std::to_string(::getpid()) + "-" + std::to_string(counter_++) + ".json";
    std::remove(path_.c_str());
  }
  ~TempPath() {  // KOLO_KEEP_TIMELINES=1 keeps the files, to look at
    if (!std::getenv("KOLO_KEEP_TIMELINES")) std::remove(path_.c_str());
  }
  const std::string& str() const { return path_; }

 private:
  static inline std::atomic<int> counter_{0};
  std::string path_;
};

// The file parsed as JSON; a parse error fails the test with the file's text.
inline json Parse(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  const std::string all = text.str();
  const std::string tail = all.substr(all.size() > 300 ? all.size() - 300 : 0);
  EXPECT_FALSE(j.is_discarded()) << path << " is not valid JSON; it ends with:\n" << tail;
  EXPECT_TRUE(j.is_array()) << tail;
  return j;
}

}  // namespace testing
}  // namespace kolo

#endif  // KOLO_TESTS_UNIT_JSON_FILE_H_
