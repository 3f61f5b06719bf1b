// The deadlock check (on the coordinator). A stall is a rank that has not submitted a name yet;
// a deadlock is every rank blocked waiting for an operation that cannot complete because the
// ranks it needs are themselves blocked waiting for other operations. Nothing can change that
// without a new submission, and a rank whose every caller is blocked makes none, so there is no
// point in waiting for the stall inspector's minute.
//
// What the ranks tell: a rank whose callers are all blocked in Wait on handles still in
// negotiation (runtime/wait_watch.h, TensorQueue::NegotiatingNames) sets `blocked` in its
// RequestList and names what it waits for. While every rank is blocked and no operation ran for
// a few cycles, the controllers take the slow path (their waiting cache hits with it), so the
// coordinator sees everything pending.
//
// The rule: in kCycles consecutive slow cycles every rank is blocked, no Response was built, and
// each name a rank waits for is pending here (submitted by that rank, not by all). Then every
// name any rank waits for (with the rest of its group) fails on every rank with a report of what
// each rank waits for and who is missing. A rank that is merely late (computing, not waiting)
// is not blocked, so it is never failed. The same name under two collectives (rank 0's
// "allreduce.x" against the others' "allgather.x", kolo.torch's names) is reported as such.
//
// Limitation: a program whose other thread would submit later while every thread that
// waits is blocked looks like a deadlock; the check counts only callers blocked in a wait.
#ifndef KOLO_RUNTIME_NEGOTIATION_DEADLOCK_H_
#define KOLO_RUNTIME_NEGOTIATION_DEADLOCK_H_

#include <string>
#include <vector>

#include "runtime/negotiation/coordinator.h"
#include "protocol/message.h"

namespace kolo {

class DeadlockDetector {
 public:
  // Consecutive slow cycles the rule must hold before the names fail.
  static constexpr int kCycles = 2;

  // One slow cycle: `lists` are the ranks' RequestLists (index = rank), already added to
  // `coordinator`; `progressed` is whether this cycle built any Response. Returns the error
  // Responses of a deadlock (taken out of `coordinator`), else none.
  std::vector<Response> Observe(Coordinator& coordinator, const std::vector<RequestList>& lists,
                                bool progressed);

  // The report for a deadlock, one line (exposed for tests): what each rank waits for, and
  // each name's missing ranks; a name used under two collectives first.
  static std::string Describe(const std::vector<RequestList>& lists,
                              const std::vector<Coordinator::Waiting>& pending);

 private:
  int stuck_ = 0;
};

}  // namespace kolo

#endif  // KOLO_RUNTIME_NEGOTIATION_DEADLOCK_H_
