#!/usr/bin/env bash
# Everything a fresh machine needs to test kolo: set-up (packages, configure, build), then every
# ctest test: unit tests, the MPI suites at 2, 3 and 4 ranks, the install test. Exits non-zero
# if anything fails. Budget: under 30 minutes on a 2-core machine, set-up included.
#
# Usage: scripts/test.sh [extra ctest arguments, e.g. -L mpi or -R install]
# Environment: as scripts/setup.sh; KOLO_TEST_TIMEOUT is the per-test limit for tests that set
#              none of their own (default 600 s; every kolo test should set its own TIMEOUT).
set -euo pipefail

# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "${KOLO_ROOT}"

start=${SECONDS}
kolo_run "${KOLO_ROOT}/scripts/setup.sh"
# Serial on purpose: the MPI tests oversubscribe 2 cores with up to 4 ranks already.
kolo_run ctest --test-dir "${KOLO_BUILD_DIR}" --output-on-failure --no-tests=error \
  --timeout "${KOLO_TEST_TIMEOUT:-600}" "$@"
kolo_log "all tests passed in $((SECONDS - start)) s, set-up included"
