// How the ranks agree on a change of the process-set table (kolo_add_process_set,
// kolo_remove_process_set) before any of them makes it: each rank's call crosses as one row of
// an all-gather on the global set, negotiated like any other operation under a name of kolo's
// own (kProcessSetCallsName). Going through the negotiation rather than a bare MPI collective
// on the admin communicator makes a mistake end as every kolo operation's does, where a bare
// MPI_Allreduce would spin forever:
//  - ranks making different calls (other sets, other lists, an add against a remove) each see
//    every rank's call and fail together, naming who called what;
//  - a rank that makes another kolo call instead and waits for it is a deadlock
//    (runtime/negotiation/deadlock.h): both fail on every rank within seconds, naming what each waits for;
//  - a rank that is late or never calls is a stall (runtime/negotiation/stall_inspector.h): named with the
//    waiting ranks after KOLO_STALL_CHECK_TIME_SECONDS, failed after
//    KOLO_STALL_SHUTDOWN_TIME_SECONDS; a rank that dies is reported by the peer watch; the
//    waiting ranks sleep meanwhile.
// No rank touches its table or the admin communicator unless every rank made the same call, so
// the tables stay equal and the MPI calls that follow on the admin communicator (the new set's
// MPI_Comm_split) are made by every rank, in the same order.
#ifndef KOLO_RUNTIME_WORLD_PROCESS_SET_CALLS_H_
#define KOLO_RUNTIME_WORLD_PROCESS_SET_CALLS_H_

#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/runtime.h"

namespace kolo {

// The name of the all-gather; an application that used it itself would take part in it.
inline constexpr char kProcessSetCallsName[] = "__kolo_process_set_calls";

struct ProcessSetCall {
  enum Kind { kAdd = 1, kRemove = 2 };
  Kind kind = kAdd;
  bool valid = true;       // kAdd: whether the list passed this rank's own checks
  std::vector<int> ranks;  // kAdd, when valid: ascending
  int id = 0;              // kRemove
  bool operator==(const ProcessSetCall& o) const {
    return kind == o.kind && valid == o.valid && ranks == o.ranks && id == o.id;
  }
  // "add_process_set([0,1])", "add_process_set(an invalid list)", "remove_process_set(1)".
  std::string ToString() const;
};

// Rows of `size` + 2 int32s: kind, then the id (remove) or the count (add, -1 when invalid),
// then the ranks, padded with -1. A valid list of the global set has at most `size` ranks.
std::vector<int32_t> EncodeCall(const ProcessSetCall& call, int size);
ProcessSetCall DecodeCall(const int32_t* row, int size);

// "" when every rank made the same call; else who made which, ranks grouped by call:
// all adds: "ranks 0,1 passed [0,1], rank 2 passed [0,2]"; all removes: "rank 0 removes 1,
// ranks 1,2 remove 2"; otherwise "ranks 0,1 called remove_process_set(1), rank 2 called
// add_process_set([0,1])".
std::string DescribeDifferences(const std::vector<ProcessSetCall>& calls);

// Every rank's call (index = rank) through `global`'s negotiation. Blocks until every rank has
// called, or fails with the negotiation's error (a deadlock, a stall past the shutdown time, a
// lost peer, a shutdown).
StatusOr<std::vector<ProcessSetCall>> ExchangeCalls(Runtime& global, const ProcessSetCall& mine);

}  // namespace kolo

#endif  // KOLO_RUNTIME_WORLD_PROCESS_SET_CALLS_H_
