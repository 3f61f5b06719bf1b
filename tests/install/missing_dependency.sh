#!/usr/bin/env bash
# A required dependency that is missing stops CMake's configuration (and so `pip install`) with
# one line naming the Debian package to install (cmake/dependencies.cmake). Each case hides one
# dependency from a configuration of a scratch build folder and checks that it fails with exactly
# that line: MPI (CMake's FindMPI), hwloc (pkg-config), FlatBuffers (a CMake package) and DLPack
# (a header).
# Usage: missing_dependency.sh SOURCE_DIR
set -euo pipefail
src=$1
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
failures=0

# expect NAME "PACKAGES" [env VAR=VALUE...] -- [cmake arguments]
expect() {
  local name=$1 packages=$2 envs=() log="${work}/${1}.log"
  shift 2
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  if env "${envs[@]}" cmake -S "${src}" -B "${work}/${name}" -DKOLO_BUILD_TESTS=OFF \
      -DKOLO_WITH_CUDA=OFF "$@" >"${log}" 2>&1; then
    echo "FAIL ${name}: configured although it was hidden"
    failures=$((failures + 1))
    return
  fi
  local lines
  lines="$(grep -c 'kolo needs' "${log}" || true)"
  if [[ ${lines} != 1 ]] ||
      ! grep -qxE " +kolo needs .+: install it with \`apt-get install ${packages}\`" "${log}"; then
    echo "FAIL ${name}: expected one line naming apt-get install ${packages}; CMake said:"
    sed 's/^/  | /' "${log}" | tail -n 15
    failures=$((failures + 1))
    return
  fi
  echo "ok   ${name}: $(grep 'kolo needs' "${log}" | sed 's/^ *//')"
}

expect mpi "libopenmpi-dev openmpi-bin" -- -DCMAKE_DISABLE_FIND_PACKAGE_MPI=TRUE
expect hwloc "libhwloc-dev" PKG_CONFIG_LIBDIR="${work}/no-pkgconfig" --
expect flatbuffers "libflatbuffers-dev flatbuffers-compiler" -- \
  -DCMAKE_DISABLE_FIND_PACKAGE_flatbuffers=TRUE
# spdlog, nlohmann-json and CLI11 are found as FlatBuffers is (a CMake package, then the same
# kolo_missing line), so one of the four ways each dependency is looked for is tested here.
expect dlpack "libdlpack-dev" -- -DCMAKE_IGNORE_PATH=/usr/include
if ((failures > 0)); then
  echo "${failures} case(s) failed"
  exit 1
fi
