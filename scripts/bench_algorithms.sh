#!/usr/bin/env bash
# kolo's all-reduce algorithms against MPI_Allreduce on this machine: at 2 and 4 ranks,
# calibrates the cost model (kolo-bench --calibrate), then runs `kolo-bench -a all --check` with
# that tuning file over 16 B .. 256 MiB, and draws busbw per algorithm to docs/algorithms-np{2,4}.png.
# Tables, CSV rows and the tuning file stay under OUT. MPI_Allreduce runs as is (the malloc
# variables of docs/machine-notes.md 2 are not set here; set them in the environment to compare, the
# output header says which are set).
#
# Usage: scripts/bench_algorithms.sh [OUT]   (default OUT: /tmp/kolo-algorithms-<date>)
# Takes a few minutes on a 2-core machine; run it on an otherwise idle machine.
set -euo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "${KOLO_ROOT}"
out="${1:-/tmp/kolo-algorithms-$(date +%Y%m%d-%H%M)}"
mkdir -p "${out}"
bench="${KOLO_BUILD_DIR}/bench/kolo-bench"
[[ -x "${bench}" ]] || { kolo_log "no ${bench}: run scripts/setup.sh first"; exit 1; }

# Ranks bound to cores where there are enough cores, as mpirun does by default (which
# --oversubscribe turns off). Even so, on a small VM whole runs sometimes come out ~4x slower for
# every variant (both vCPUs on one host core, presumably): compare ratios within one run, and
# rerun when MPI_Allreduce's own times jump.
# Two busy loops pinned to cores 0 and 1: in parallel they should take as long as one alone.
# Prints parallel/alone x 100; ~100 when the cores are really two, ~200 when the host serves
# both virtual CPUs from one core (then every variant measures several times slower).
parallel_percent() {
  local loop='import time; t=time.perf_counter(); sum(range(4000000)); print(time.perf_counter()-t)'
  local alone both0 both1
  alone=$(taskset -c 0 /usr/bin/python3 -c "${loop}")
  both0=$( (taskset -c 1 /usr/bin/python3 -c "${loop}" >/dev/null &) ; taskset -c 0 /usr/bin/python3 -c "${loop}")
  /usr/bin/python3 -c "print(int(100 * ${both0} / ${alone}))"
}
wait_for_parallel_cores() {
  local p tries=0
  (( $(nproc) >= 2 )) || return 0
  while p=$(parallel_percent); (( p > 140 && tries < 10 )); do
    kolo_log "cores run at ${p}% of their speed alone (shared by the host?): waiting 20 s"
    sleep 20
    tries=$((tries + 1))
  done
  kolo_log "cores in parallel: ${p}% of their speed alone"
}
bind_for() { if (( $1 <= $(nproc) )); then echo --bind-to core; else echo --bind-to none; fi; }
for np in 2 4; do
  # The model is calibrated at the rank count it will serve (barriers and bandwidth per rank
  # change when ranks share cores).
  tuning="${out}/kolo_tuning-np${np}.json"
  wait_for_parallel_cores
  # shellcheck disable=SC2046
  kolo_run timeout 300 mpirun "${KOLO_MPIRUN_FLAGS[@]}" $(bind_for "${np}") -np "${np}" \
    "${bench}" --calibrate --output "${tuning}" | tee "${out}/calibrate-np${np}.txt"
  export KOLO_TUNING_FILE="${tuning}"
  # shellcheck disable=SC2046
  kolo_run timeout 900 mpirun "${KOLO_MPIRUN_FLAGS[@]}" $(bind_for "${np}") -x KOLO_TUNING_FILE \
    -np "${np}" "${bench}" -a all --check -b 16 -e 256M -f 4 \
    --output "${out}/algorithms-np${np}.csv" | tee "${out}/algorithms-np${np}.txt"
  /usr/bin/python3 scripts/plot_algorithms.py "${out}/algorithms-np${np}.csv" \
    "docs/algorithms-np${np}.png" --title "kolo all-reduce algorithms, ${np} ranks ($(hostname))"
done
kolo_log "results in ${out}; plots in docs/algorithms-np2.png, docs/algorithms-np4.png"
