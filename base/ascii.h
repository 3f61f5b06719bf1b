// ASCII text helpers for names read from the environment and the command line (knob values,
// NCCL_ALGO, log levels), which are compared without regard to case.
#ifndef KOLO_BASE_ASCII_H_
#define KOLO_BASE_ASCII_H_

#include <cctype>
#include <string>
#include <string_view>

namespace kolo {

// `text` with A-Z as a-z; other bytes as they are.
inline std::string AsciiLower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace kolo

#endif  // KOLO_BASE_ASCII_H_
