// Seconds as the runtime's messages print them: a setting as the user wrote it, a waited time
// to a tenth.
#ifndef KOLO_BASE_SECONDS_TEXT_H_
#define KOLO_BASE_SECONDS_TEXT_H_

#include <cstdio>
#include <string>

namespace kolo {

// A knob's value as set: "60", "0.5", "2.25" (%g).
inline std::string SettingText(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", seconds);
  return buf;
}

// A measured time to a tenth of a second: "12.0", "0.3".
inline std::string TenthsText(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", seconds);
  return buf;
}

}  // namespace kolo

#endif  // KOLO_BASE_SECONDS_TEXT_H_
