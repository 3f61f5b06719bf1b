// KOLO_CHECK: an invariant of kolo's own code. A broken one is a bug, not a user's error (those
// are Statuses): it logs the condition, where it is and the values it compared, then aborts, so
// the core dump or the sanitizer's report shows the state that broke it.
//
//   KOLO_CHECK(slot < slots_.size()) << "slot of '" << name << "'";
//   KOLO_CHECK_EQ(entries.size(), tensors);   // "entries.size() == tensors (3 vs 4)"
#ifndef KOLO_BASE_CHECK_H_
#define KOLO_BASE_CHECK_H_

#include <sstream>
#include <string>
#include <tuple>

namespace kolo {
namespace internal {

// Collects the message of a failed check; its destructor logs it and aborts.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  std::ostream& stream() { return out_; }

 private:
  std::ostringstream out_;
};

template <typename A, typename B>
std::string CheckOpValues(const A& a, const B& b) {
  std::ostringstream out;
  out << " (" << a << " vs " << b << ")";
  return out.str();
}

}  // namespace internal
}  // namespace kolo

#define KOLO_CHECK(condition) \
  if (condition) {            \
  } else                      \
    ::kolo::internal::CheckFailure(__FILE__, __LINE__, #condition).stream()

// Evaluates each operand once (copies of the values, compared and printed); the message shows
// both values.
#define KOLO_CHECK_OP(op, a, b)                                                            \
  if (const auto kolo_check_values_ = std::make_tuple((a), (b));                           \
      std::get<0>(kolo_check_values_) op std::get<1>(kolo_check_values_)) {                \
  } else                                                                                   \
    ::kolo::internal::CheckFailure(__FILE__, __LINE__, #a " " #op " " #b).stream()         \
        << ::kolo::internal::CheckOpValues(std::get<0>(kolo_check_values_),                \
                                           std::get<1>(kolo_check_values_))
#define KOLO_CHECK_EQ(a, b) KOLO_CHECK_OP(==, a, b)
#define KOLO_CHECK_NE(a, b) KOLO_CHECK_OP(!=, a, b)
#define KOLO_CHECK_LT(a, b) KOLO_CHECK_OP(<, a, b)
#define KOLO_CHECK_LE(a, b) KOLO_CHECK_OP(<=, a, b)

#endif  // KOLO_BASE_CHECK_H_
