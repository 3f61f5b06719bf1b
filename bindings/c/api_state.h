// What the C API's files share: the object behind kolo_handle_t and the calling thread's
// kolo_last_error() text.
#ifndef KOLO_BINDINGS_C_API_STATE_H_
#define KOLO_BINDINGS_C_API_STATE_H_

#include <memory>
#include <string>

#include "base/status.h"
#include "kolo/kolo.h"
#include "runtime/handle.h"

struct kolo_handle_s {
  std::shared_ptr<kolo::Handle> handle;
};

namespace kolo::capi {

// This thread's kolo_last_error() text; every kolo_* call that can fail clears it first.
std::string& LastError();

// Records `s`'s message as this thread's last error and returns its code.
kolo_status_t Fail(const Status& s);

}  // namespace kolo::capi

#endif  // KOLO_BINDINGS_C_API_STATE_H_
