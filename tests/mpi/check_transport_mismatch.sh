#!/usr/bin/env bash
# Every rank must name the same KOLO_TRANSPORT. Runs EXAMPLE (which calls kolo_init) under
# mpirun with the last rank on KOLO_TRANSPORT=ucx and the others on the default (mpi); passes
# only if mpirun exits non-zero within 30 s and every rank printed kolo_init's refusal naming
# both values and a rank that holds each.
#
# Usage: check_transport_mismatch.sh EXAMPLE MPIEXEC NUMPROC_FLAG NP [MPIEXEC_PREFLAGS...]
set -uo pipefail
# shellcheck source=failed_job.sh
source "$(dirname "${BASH_SOURCE[0]}")/failed_job.sh"

if [[ $# -lt 4 ]]; then
  echo "usage: $0 EXAMPLE MPIEXEC NUMPROC_FLAG NP [PREFLAGS...]" >&2
  exit 2
fi
example=$1 mpiexec=$2 np_flag=$3 np=$4
shift 4
last=$((np - 1))

log=$(mktemp)
trap 'rm -f "${log}"' EXIT
unset KOLO_TRANSPORT
# The rank's variable is set by the rank itself: mpirun's -x would give it to every rank.
timeout -k 5 30 "${mpiexec}" "${np_flag}" "${np}" "$@" sh -c \
  'if [ "${OMPI_COMM_WORLD_RANK}" = "$1" ]; then export KOLO_TRANSPORT=ucx; fi; exec "$2"' \
  sh "${last}" "${example}" >"${log}" 2>&1
rc=$?
cat "${log}"

fail=0
check_failed_job "${rc}" 30 "kolo_init must refuse different transports" || fail=1
# The refusal names the first rank that holds each value.
want="rank 0 has 'mpi', rank ${last} has 'ucx'"
count=$(grep -c "KOLO_TRANSPORT must be the same on every rank: ${want}" "${log}")
if [[ ${count} -ne ${np} ]]; then
  echo "FAIL: ${count} of ${np} ranks printed the refusal \"...${want}\"" >&2
  fail=1
fi
[[ ${fail} -eq 0 ]] && echo "PASS: every rank refused the different transports: ${want}"
exit ${fail}
