#!/usr/bin/env bash
# The measurements recorded in docs/benchmarks.md, in one run: the nccl-tests-style sweep and the
# model replays at 2 and 4 ranks, MPI both without and with the malloc settings of
# docs/machine-notes.md 2, fusion on/off, Horovod's fixed cycle (KOLO_WAKE_ON_SUBMIT=0), the
# negotiation's cost with and without the response cache, and autotune against a fixed sweep.
# Every kolo-bench run interleaves its paths and keeps rows + JSON under OUT.
#
# Usage: scripts/benchmarks.sh [OUT]   (default OUT: /tmp/kolo-benchmarks-<date>)
# Takes ~10 minutes on a 2-core machine; run it on an otherwise idle machine.
set -euo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "${KOLO_ROOT}"
out="${1:-/tmp/kolo-benchmarks-$(date +%Y%m%d-%H%M)}"
mkdir -p "${out}"
bench="${KOLO_BUILD_DIR}/bench/kolo-bench"
[[ -x "${bench}" ]] || { kolo_log "no ${bench}: run scripts/setup.sh first"; exit 1; }
tuned=(MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=17179869184 MALLOC_ARENA_MAX=1)

run() {  # run NAME NP [ENV=...] -- ARGS...
  local name=$1 np=$2 envs=()
  shift 2
  while [[ $# -gt 0 && $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  kolo_log "${name}: np ${np} ${envs[*]} $*"
  env "${envs[@]}" timeout 900 mpirun "${KOLO_MPIRUN_FLAGS[@]}" -np "${np}" "${bench}" "$@" \
    --json "${out}/${name}.json" > "${out}/${name}.txt" 2>&1
  grep -v '^# env:' "${out}/${name}.txt"
}

for np in 2 4; do
  run "sweep-np${np}" "${np}" -- -b 8 -e 64M -f 4 -c 1
  run "sweep-np${np}-malloc-tuned" "${np}" "${tuned[@]}" -- -b 8 -e 64M -f 4 -c 1
  run "sweep-np${np}-fixed-cycle" "${np}" KOLO_WAKE_ON_SUBMIT=0 -- -b 8 -e 2M -f 16 -c 1
  for model in resnet50 bert-base tiny-1000; do
    iters=(-n 20 -w 5)
    [[ ${model} == bert-base ]] && iters=(-n 5 -w 2)
    run "model-${model}-np${np}" "${np}" -- --model "${model}" "${iters[@]}"
    run "model-${model}-np${np}-malloc-tuned" "${np}" "${tuned[@]}" -- --model "${model}" "${iters[@]}"
    run "model-${model}-np${np}-nofusion" "${np}" KOLO_FUSION_THRESHOLD=0 -- --model "${model}" \
      "${iters[@]}" --paths kolo
  done
done
# Negotiation cost per cycle, response cache on and off (one run does both).
for np in 2 4; do
  run "negotiation-np${np}" "${np}" -- --negotiation -n 1000 -w 50
done
# Autotune against a fixed sweep of the fusion threshold, ResNet-50 at 2 ranks.
run "autotune-resnet50-np2" 2 KOLO_AUTOTUNE=1 "KOLO_AUTOTUNE_LOG=${out}/autotune.csv" -- \
  --model resnet50 -n 500 -w 5 --paths kolo
cat "${out}/autotune.csv"
for t in 0 1M 4M 16M 64M 128M; do
  run "fixed-threshold-${t}-resnet50-np2" 2 "KOLO_FUSION_THRESHOLD=${t}" -- \
    --model resnet50 -n 60 -w 5 --paths kolo
done
kolo_log "results in ${out}"
