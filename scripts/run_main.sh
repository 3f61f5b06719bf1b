#!/usr/bin/env bash
# The main job on a fresh machine: set-up (packages, configure, build), then data-parallel
# training on real data under mpirun: examples/train_digits.py (scikit-learn's bundled
# handwritten digits, an MLP, kolo.torch.DistributedOptimizer) over 2 ranks. It prints the test
# accuracy each epoch and ends with the check that every rank holds the same parameters, equal
# to a single-process run over the same global batches; it exits non-zero if that check fails
# or the accuracy stays under 90%.
#
# Usage: scripts/run_main.sh [extra train_digits.py arguments]
# Environment: as scripts/setup.sh; KOLO_NP overrides the number of ranks (default 2).
set -euo pipefail

# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "${KOLO_ROOT}"

kolo_run "${KOLO_ROOT}/scripts/setup.sh"
if ! compgen -G "${KOLO_BUILD_DIR}/python/kolo/_kolo*.so" > /dev/null; then
  kolo_log "kolo's Python extension is missing from ${KOLO_BUILD_DIR}/python (pybind11 or python3-dev?)"
  exit 1
fi
kolo_log "main job: examples/train_digits.py, ${KOLO_NP:-2} ranks"
export PYTHONPATH="${KOLO_BUILD_DIR}/python${PYTHONPATH:+:${PYTHONPATH}}"
kolo_run mpirun "${KOLO_MPIRUN_FLAGS[@]}" -np "${KOLO_NP:-2}" \
  /usr/bin/python3 "${KOLO_ROOT}/examples/train_digits.py" "$@"
