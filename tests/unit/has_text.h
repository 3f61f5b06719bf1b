// Whether a text (an error message, a report, a file) holds a part: what the tests of messages
// check, since the rest of a message may change.
#ifndef KOLO_TESTS_UNIT_HAS_TEXT_H_
#define KOLO_TESTS_UNIT_HAS_TEXT_H_

#include <string>

namespace kolo::testing {

inline bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace kolo::testing

#endif  // KOLO_TESTS_UNIT_HAS_TEXT_H_
