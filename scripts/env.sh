# shellcheck shell=bash
# Shared environment for kolo's scripts; sourced by scripts/setup.sh, test.sh, run_main.sh and
# tests/install/run_install_test.sh. Safe to source more than once. Sets:
#   KOLO_ROOT          the repository root (absolute)
#   KOLO_BUILD_DIR     the build directory (default $KOLO_ROOT/build; override from the caller)
#   KOLO_BUILD_JOBS    parallel build jobs (default 2: the reference machine has 2 cores)
#   KOLO_MPIRUN_FLAGS  array of mpirun flags for containers: --oversubscribe, so 3 or 4 ranks run
#                      on 2 cores (CMake's MPIEXEC_PREFLAGS gets the same flags from setup.sh)
# and, when running as root (CI, containers), exports Open MPI's two variables that allow it.

KOLO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export KOLO_ROOT
export KOLO_BUILD_DIR="${KOLO_BUILD_DIR:-${KOLO_ROOT}/build}"
export KOLO_BUILD_JOBS="${KOLO_BUILD_JOBS:-2}"

# Not exported (bash cannot export arrays); every script that needs it sources this file.
# shellcheck disable=SC2034
KOLO_MPIRUN_FLAGS=(--oversubscribe)

if [[ "$(id -u)" == 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1
  export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

# kolo_log MESSAGE...: what the scripts do, on stderr so stdout stays the programs' own.
kolo_log() {
  printf '[kolo] %s\n' "$*" >&2
}

# kolo_run CMD...: print a command (shell-quoted), then run it.
kolo_run() {
  local quoted
  printf -v quoted '%q ' "$@"
  kolo_log "+ ${quoted% }"
  "$@"
}
