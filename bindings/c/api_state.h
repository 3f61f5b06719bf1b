// What the C API's files share: the process's World (the one pointer the C API holds), the
// object behind kolo_handle_t and the calling thread's kolo_last_error() text.
#ifndef KOLO_BINDINGS_C_API_STATE_H_
#define KOLO_BINDINGS_C_API_STATE_H_

#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "kolo/kolo.h"
#include "runtime/handle.h"
#include "runtime/world/world.h"

struct kolo_handle_s {
  std::shared_ptr<kolo::Handle> handle;
};

namespace kolo::capi {

// This thread's kolo_last_error() text; every kolo_* call that can fail clears it first.
std::string& LastError();

// Records `s`'s message as this thread's last error and returns its code.
kolo_status_t Fail(const Status& s);

// The World between kolo_init and kolo_shutdown, nullptr outside. Shared, so a call racing
// kolo_shutdown keeps it alive until it returns.
std::shared_ptr<World> CurrentWorld();

// kolo_init*: runs `start` unless a World exists (then OK), and keeps what it made. One start
// at a time; the other calls wait for it.
kolo_status_t StartWorldOnce(const std::function<StatusOr<std::shared_ptr<World>>()>& start);

// kolo_shutdown: the World, which the C API forgets (nullptr when there was none).
std::shared_ptr<World> TakeWorld();

// The runtime of process set `id` (0: the global one) on this rank; nullptr with *why set when
// kolo is not initialized, the set is unknown or this rank is not a member (`what` names the
// call for the message).
std::shared_ptr<Runtime> RuntimeOf(int id, const std::string& what, Status* why);

}  // namespace kolo::capi

#endif  // KOLO_BINDINGS_C_API_STATE_H_
