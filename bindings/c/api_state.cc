#include "bindings/c/api_state.h"

#include <mutex>
#include <utility>

namespace kolo::capi {
namespace {

std::mutex g_mu;
std::shared_ptr<World> g_world;  // guarded by g_mu

}  // namespace

std::string& LastError() {
  thread_local std::string last_error;
  return last_error;
}

kolo_status_t Fail(const Status& s) {
  LastError() = s.message();
  return static_cast<kolo_status_t>(s.code());
}

std::shared_ptr<World> CurrentWorld() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_world;
}

kolo_status_t StartWorldOnce(const std::function<StatusOr<std::shared_ptr<World>>()>& start) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_world) return KOLO_SUCCESS;
  auto world = start();
  if (!world.ok()) return Fail(world.status());
  g_world = std::move(world).value();
  return KOLO_SUCCESS;
}

std::shared_ptr<World> TakeWorld() {
  std::lock_guard<std::mutex> lock(g_mu);
  return std::move(g_world);
}

std::shared_ptr<Runtime> RuntimeOf(int id, const std::string& what, Status* why) {
  std::shared_ptr<World> world = CurrentWorld();
  if (!world) {
    *why = FailedPreconditionError(what + ": kolo is not initialized");
    return nullptr;
  }
  return world->process_sets().RuntimeOf(id, what, why);
}

}  // namespace kolo::capi
