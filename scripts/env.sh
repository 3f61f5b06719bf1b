# shellcheck shell=bash
# Shared environment for kolo's scripts; sourced by scripts/setup.sh, test.sh, run_main.sh,
# sanitize.sh and tests/install/run_install_test.sh. Safe to source more than once. Sets:
#   KOLO_ROOT          the repository root (absolute)
#   KOLO_BUILD_DIR     the build directory (default $KOLO_ROOT/build; override from the caller)
#   KOLO_BUILD_JOBS    parallel build jobs (default 2: the reference machine has 2 cores)
#   KOLO_BUILD_LOCK    optional, read by kolo_build: a file to flock around every build, so
#                      checkouts sharing one machine build one at a time (unset: no lock)
#   KOLO_MPIRUN_FLAGS  array of mpirun flags for containers: --oversubscribe, so 3 or 4 ranks run
#                      on 2 cores (CMake's MPIEXEC_PREFLAGS gets the same flags from setup.sh)
#   KOLO_PACKAGES      array of the Debian packages kolo builds, tests and runs with
# and, when running as root (CI, containers), exports Open MPI's two variables that allow it.

KOLO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export KOLO_ROOT
export KOLO_BUILD_DIR="${KOLO_BUILD_DIR:-${KOLO_ROOT}/build}"
export KOLO_BUILD_JOBS="${KOLO_BUILD_JOBS:-2}"

# Not exported (bash cannot export arrays); every script that needs it sources this file.
# shellcheck disable=SC2034
KOLO_MPIRUN_FLAGS=(--oversubscribe)
# shellcheck disable=SC2034
KOLO_PACKAGES=(
  build-essential cmake pkg-config
  libopenmpi-dev openmpi-bin libpmix-dev
  libhwloc-dev hwloc
  libucx-dev
  libflatbuffers-dev flatbuffers-compiler
  libspdlog-dev libcli11-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  pybind11-dev libdlpack-dev python3-venv python3-mpi4py
  python3-dev python3-numpy python3-torch python3-sklearn python3-pytest
  python3-matplotlib
  iproute2
)

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

# kolo_build BUILD_DIR [cmake --build arguments]: build with KOLO_BUILD_JOBS jobs, under
# `flock "$KOLO_BUILD_LOCK"` when that is set.
kolo_build() {
  local dir=$1 lock=()
  shift
  if [[ -n "${KOLO_BUILD_LOCK:-}" ]]; then
    lock=(flock "${KOLO_BUILD_LOCK}")
  fi
  kolo_run "${lock[@]}" cmake --build "${dir}" -j "${KOLO_BUILD_JOBS}" "$@"
}

# kolo_install_packages PACKAGE...: installs the Debian packages among these that are missing
# (apt-get as root, or sudo); KOLO_SKIP_APT=1 skips this step.
kolo_install_packages() {
  if [[ "${KOLO_SKIP_APT:-0}" == 1 ]]; then
    kolo_log "packages: skipped (KOLO_SKIP_APT=1)"
    return
  fi
  if ! command -v dpkg-query >/dev/null 2>&1; then
    kolo_log "packages: dpkg-query not found (not Debian?); install the equivalents of:"
    kolo_log "  $*"
    kolo_log "then re-run with KOLO_SKIP_APT=1"
    exit 1
  fi
  local missing=() pkg
  for pkg in "$@"; do
    if [[ "$(dpkg-query -W -f='${db:Status-Abbrev}' "${pkg}" 2>/dev/null || true)" != ii* ]]; then
      missing+=("${pkg}")
    fi
  done
  if ((${#missing[@]} == 0)); then
    kolo_log "packages: all $# installed"
    return
  fi
  kolo_log "packages: installing ${missing[*]}"
  local sudo=()
  if [[ "$(id -u)" != 0 ]]; then
    if ! command -v sudo >/dev/null 2>&1; then
      kolo_log "not root and no sudo: install these packages first: ${missing[*]}"
      exit 1
    fi
    sudo=(sudo)
  fi
  kolo_run "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
  kolo_run "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"
}
