#!/usr/bin/env bash
# Set-up shared by scripts/test.sh and scripts/run_main.sh; also usable on its own.
#   1. installs the Debian packages kolo builds with, only those missing (apt-get as root, or sudo)
#   2. configures build/ (RelWithDebInfo; mpirun flags for containers via MPIEXEC_PREFLAGS)
#   3. builds with -j2
# Idempotent: a second run checks the packages with dpkg-query, re-runs CMake and an incremental
# build, and is done in seconds. Works from any directory.
#
# Usage: scripts/setup.sh [extra cmake configure arguments, e.g. -DKOLO_SANITIZE=address]
# Environment: KOLO_BUILD_DIR (default build/, relative paths are from the repository root),
#              KOLO_BUILD_JOBS (default 2), KOLO_BUILD_TYPE (default RelWithDebInfo),
#              KOLO_SKIP_APT=1 to skip the package step (e.g. on a non-Debian machine),
#              KOLO_BUILD_LOCK (a file to flock around the build on a shared machine).
set -euo pipefail

# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "${KOLO_ROOT}"

# RelWithDebInfo with line tables only (-g1): what backtraces and sanitizer reports need, and
# about 13% less compile time than -g (the test command builds kolo three times).
configure_and_build() {
  local preflags
  preflags="$(IFS=';'; echo "${KOLO_MPIRUN_FLAGS[*]}")"
  kolo_log "configure: ${KOLO_BUILD_DIR}"
  kolo_run cmake -S "${KOLO_ROOT}" -B "${KOLO_BUILD_DIR}" \
    -DCMAKE_BUILD_TYPE="${KOLO_BUILD_TYPE:-RelWithDebInfo}" \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
    -DMPIEXEC_PREFLAGS="${preflags}" \
    "$@"
  kolo_log "build: -j${KOLO_BUILD_JOBS}"
  kolo_build "${KOLO_BUILD_DIR}"
}

start=${SECONDS}
kolo_install_packages "${KOLO_PACKAGES[@]}"
configure_and_build "$@"
kolo_log "set-up done in $((SECONDS - start)) s (build: ${KOLO_BUILD_DIR})"
