#!/usr/bin/env bash
# Runs tests/mpi/mismatch_demo.c under mpirun with 2 ranks (30 s limit) and passes only if
# mpirun exited non-zero (but not by the time limit) and both ranks printed kolo's message
# naming 'grad/fc1', the shape mismatch, rank 0 and rank 1 and both shapes.
#
# Usage: check_mismatch_demo.sh DEMO MPIEXEC NUMPROC_FLAG NP [MPIEXEC_PREFLAGS...]
set -uo pipefail
# shellcheck source=failed_job.sh
source "$(dirname "${BASH_SOURCE[0]}")/failed_job.sh"

if [[ $# -lt 4 ]]; then
  echo "usage: $0 DEMO MPIEXEC NUMPROC_FLAG NP [PREFLAGS...]" >&2
  exit 2
fi
demo=$1 mpiexec=$2 np_flag=$3 np=$4
shift 4

log=$(mktemp)
trap 'rm -f "${log}"' EXIT
echo "+ timeout 30 ${mpiexec} ${np_flag} ${np} $* ${demo}"
timeout -k 5 30 "${mpiexec}" "${np_flag}" "${np}" "$@" "${demo}" >"${log}" 2>&1
rc=$?
cat "${log}"

fail=0
check_failed_job "${rc}" 30 "the demo must exit non-zero" || fail=1
for r in 0 1; do
  line=$(grep -E "^rank ${r}: .*'grad/fc1'" "${log}" | head -n 1)
  if [[ -z "${line}" ]]; then
    echo "FAIL: rank ${r} did not print the mismatch message for 'grad/fc1'" >&2
    fail=1
    continue
  fi
  msg=${line#"rank ${r}: "}  # kolo's message, without the demo's prefix
  for want in "shape" "rank 0" "rank 1" "[3,4]" "[4,3]"; do
    if [[ "${msg}" != *"${want}"* ]]; then
      echo "FAIL: rank ${r}'s message lacks '${want}': ${msg}" >&2
      fail=1
    fi
  done
done
if [[ ${fail} -eq 0 ]]; then
  echo "PASS: both ranks reported the mismatch and mpirun exited ${rc}"
fi
exit ${fail}
