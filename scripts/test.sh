#!/usr/bin/env bash
# Everything a fresh machine needs to test kolo: set-up (packages, configure, build), then every
# ctest test: unit tests (two at a time), then the MPI suites at 2, 3 and 4 ranks, the install
# test, the tests across nodes made of network namespaces (label multinode; skipped where
# namespaces cannot be made) and the rest (one at a time); then the
# sanitizer and fuzz stages of scripts/sanitize.sh (unit tests under ASan+UBSan and the MPI
# suites at 2 ranks, the thread-world tests under TSan, a 30 s fuzz run of the wire decoders).
# Each stage prints a line when it starts and one with its time when it ends. Exits non-zero at
# the first stage that fails. Budget: under 30 minutes on a 2-core machine, set-up included.
#
# Usage: scripts/test.sh [extra ctest arguments, e.g. -L mpi or -R install]
# Environment: as scripts/setup.sh; KOLO_TEST_TIMEOUT is the per-test limit for tests that set
#              none of their own (default 600 s; every kolo test should set its own TIMEOUT);
#              KOLO_SANITIZE_STAGES, the stages of scripts/sanitize.sh to run (default
#              "address thread fuzz"; empty: none), KOLO_FUZZ_SECONDS (default 30).
set -euo pipefail

# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "${KOLO_ROOT}"

# stage NAME CMD...: runs one stage (a program, so `set -e` holds inside it) between two lines.
stage() {
  local name=$1 t0=${SECONDS} rc=0
  shift
  kolo_log "=== ${name}: start"
  "$@" || rc=$?
  if ((rc != 0)); then
    kolo_log "=== ${name}: FAILED (exit ${rc}) after $((SECONDS - t0)) s"
    exit "${rc}"
  fi
  kolo_log "=== ${name}: passed in $((SECONDS - t0)) s"
}

ctest_run() {
  kolo_run ctest --test-dir "${KOLO_BUILD_DIR}" --output-on-failure --no-tests=error \
    --timeout "${KOLO_TEST_TIMEOUT:-600}" "$@"
}

start=${SECONDS}
stage set-up kolo_run "${KOLO_ROOT}/scripts/setup.sh"
if (($# > 0)); then
  stage ctest ctest_run "$@"
else
  # The unit tests (label unit: one process each, ranks as threads) two at a time: ~1400 short
  # processes, whose start-up is most of their time. The rest serially, on purpose: the MPI
  # tests oversubscribe 2 cores with up to 4 ranks already.
  stage ctest-unit ctest_run -L unit -j 2
  stage ctest ctest_run -LE unit
fi
read -r -a sanitize_stages <<<"${KOLO_SANITIZE_STAGES-address thread fuzz}"
if ((${#sanitize_stages[@]} > 0)); then
  # sanitize.sh prints its own line per stage.
  kolo_run "${KOLO_ROOT}/scripts/sanitize.sh" "${sanitize_stages[@]}"
fi
kolo_log "all tests passed in $((SECONDS - start)) s, set-up included"
