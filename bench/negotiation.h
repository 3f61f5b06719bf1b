// --negotiation: what kolo's negotiation costs per cycle, with the response cache and without.
//
// For each cache setting (KOLO_CACHE_CAPACITY as set, or 1024; then 0 — kolo is restarted in
// between, which re-reads the environment) and each N in --tensors (default 1,100,1000), every
// step submits N one-element float tensors under the same N names, as a training loop does
// with its gradients, and waits for all of them. The first steps (-w) fill the cache; the
// next -n steps are timed. Columns:
//   step_us        median step time, max over ranks (submission to the last completion)
//   cycles/step    background-thread cycles per step (rank 0)
//   slow/step      cycles that went to the coordinator (gather + broadcast), per step
//   neg_us/cycle   time in the controller per cycle: min over ranks (the rank that waits least
//                  on its peers is the closest to the protocol's own cost) and max
//   local_us/cyc   of that, the part outside the control plane's collectives (the bookkeeping:
//                  cache lookups, building and fusing Responses), max over ranks
//   hits/step      tensors agreed through the cache, per step
// The data moved is N*4 bytes in one fused all-reduce, so step_us is dominated by negotiation
// and bookkeeping.
#ifndef KOLO_BENCH_NEGOTIATION_H_
#define KOLO_BENCH_NEGOTIATION_H_

#include <vector>

#include "bench/harness.h"
#include "bench/json_lines.h"

namespace kolo::bench {

struct NegotiationOptions {
  std::vector<int> tensors = {1, 100, 1000};
  int steps = 200;
  int warmup = 20;
  JsonLines* json = nullptr;  // --json: one "row" record per printed row (not owned)
};

// Needs kolo not initialised on entry; leaves it initialised with the caller's environment.
// Returns false after printing a reason when a result was wrong.
bool RunNegotiation(const World& world, const NegotiationOptions& options);

}  // namespace kolo::bench

#endif  // KOLO_BENCH_NEGOTIATION_H_
