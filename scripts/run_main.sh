#!/usr/bin/env bash
# The main job on a fresh machine: set-up (packages, configure, build), then kolo-bench on the
# ResNet-50 gradient layout over 2 ranks: the whole runtime (negotiation, fusion, all-reduce)
# against one MPI_Allreduce per tensor. This stays the main job until the PyTorch training
# example lands.
#
# Usage: scripts/run_main.sh [extra kolo-bench arguments]
# Environment: as scripts/setup.sh; KOLO_NP overrides the number of ranks (default 2).
set -euo pipefail

# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "${KOLO_ROOT}"

kolo_run "${KOLO_ROOT}/scripts/setup.sh"
bench="${KOLO_BUILD_DIR}/bench/kolo-bench"
if [[ ! -x "${bench}" ]]; then
  kolo_log "kolo-bench not found at ${bench} (was it built? KOLO_BUILD_BENCH=OFF?)"
  exit 1
fi
kolo_log "main job: kolo-bench, ResNet-50 gradients, ${KOLO_NP:-2} ranks"
kolo_run mpirun "${KOLO_MPIRUN_FLAGS[@]}" -np "${KOLO_NP:-2}" "${bench}" --model resnet50 "$@"
