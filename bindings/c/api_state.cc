#include "bindings/c/api_state.h"

namespace kolo::capi {

std::string& LastError() {
  thread_local std::string last_error;
  return last_error;
}

kolo_status_t Fail(const Status& s) {
  LastError() = s.message();
  return static_cast<kolo_status_t>(s.code());
}

}  // namespace kolo::capi
