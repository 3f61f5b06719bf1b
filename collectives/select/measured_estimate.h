// The selector's estimate of an all-reduce algorithm: its cost formula (EstimateMicros), scaled
// to the calibration's measurements where the tuning file holds them for this algorithm on this
// layout (CostModel::measured_allreduce, written by `kolo-bench --calibrate`).
//
// On the calibrated layout (the same transport, ranks, nodes and ranks per node; host buffers)
// the estimate
// for n bytes is formula(n) x r(n), where r = measured / formula at the timed sizes, linear in
// log(n) between the two timed sizes around n, and the nearest timed size's ratio beyond them.
// It meets every measurement and keeps the formula's shape in between. Elsewhere (another
// transport or layout, device buffers, an algorithm the calibration did not time) it is the
// formula alone: a timing says nothing about other transports or how other links are shared.
//
// Why scale formulas rather than trust them: measured across nodes joined by shaped links, the
// formulas were right about the bytes (within 0.5%) but up to 2x off in time for some
// algorithms, and the selector then picked one 1.7-1.9x slower than the best
// (docs/benchmarks.md, "Across nodes").
#ifndef KOLO_COLLECTIVES_SELECT_MEASURED_ESTIMATE_H_
#define KOLO_COLLECTIVES_SELECT_MEASURED_ESTIMATE_H_

#include "collectives/algorithm.h"

namespace kolo {

// in.cost must be set.
double MeasuredEstimate(const AllreduceAlgorithm& algo, const SelectionInput& in);

// True when `m` was measured over in's transport, on in's layout, with host buffers.
bool MeasuredOnLayout(const MeasuredAllreduce& m, const SelectionInput& in);

}  // namespace kolo

#endif  // KOLO_COLLECTIVES_SELECT_MEASURED_ESTIMATE_H_
