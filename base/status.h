// Status and StatusOr: kolo's error carrier (Abseil's code set). Nothing throws through the
// background thread or the C API; every failure travels as a Status with context added at each
// layer, outermost first: "allreduce 'w' (fused 3 tensors): MPI_Allreduce failed: ...".
#ifndef KOLO_BASE_STATUS_H_
#define KOLO_BASE_STATUS_H_

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace kolo {

enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status OK() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message" or "OK".
  std::string ToString() const;

  // Prefixes `context` to the message ("context: message"); no-op on OK.
  Status& AddContext(std::string_view context) &;
  Status&& AddContext(std::string_view context) &&;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgumentError(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status FailedPreconditionError(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status UnimplementedError(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status NotFoundError(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status UnavailableError(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DeadlineExceededError(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
inline Status ResourceExhaustedError(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status DataLossError(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status OutOfRangeError(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) { assert(!status_.ok()); }  // NOLINT
  StatusOr(T value) : value_(std::move(value)) {}                                  // NOLINT
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T&& operator*() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace kolo

#define KOLO_STATUS_CONCAT_INNER_(a, b) a##b
#define KOLO_STATUS_CONCAT_(a, b) KOLO_STATUS_CONCAT_INNER_(a, b)

#define KOLO_RETURN_IF_ERROR(expr)                   \
  do {                                               \
    ::kolo::Status kolo_status_tmp_ = (expr);        \
    if (!kolo_status_tmp_.ok()) return kolo_status_tmp_; \
  } while (0)

#define KOLO_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

#define KOLO_ASSIGN_OR_RETURN(lhs, expr) \
  KOLO_ASSIGN_OR_RETURN_IMPL_(KOLO_STATUS_CONCAT_(kolo_statusor_, __LINE__), lhs, expr)

#endif  // KOLO_BASE_STATUS_H_
