#!/usr/bin/env bash
# Install test: installs a built kolo into a temporary prefix and builds a user's program
# against it twice, then runs both under mpirun -np 2:
#   1. CMake: tests/install/CMakeLists.txt, find_package(kolo) -> kolo::kolo;
#   2. pkg-config: mpicc examples/allreduce_example.c $(pkg-config --cflags --libs kolo).
# Then runs the installed kolo-bench, kolo-topo and kolo-scale from the prefix.
# Proves that the headers (kolo.h + generated config.h), libkolo.so with its SONAME and its MPI
# plugin, the CMake package, kolo.pc and the tools are installed, relocatable and
# self-sufficient.
#
# Usage: tests/install/run_install_test.sh [BUILD_DIR]   (default: $KOLO_BUILD_DIR or build/)
# ctest: add_test(NAME install COMMAND .../run_install_test.sh ${CMAKE_BINARY_DIR})
set -euo pipefail

# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/env.sh"
build_dir="$(cd "${1:-${KOLO_BUILD_DIR}}" && pwd)"
example="${KOLO_ROOT}/examples/allreduce_example.c"

work="$(mktemp -d "${TMPDIR:-/tmp}/kolo-install-test.XXXXXX")"
cleanup() { rm -rf "${work}"; }
trap cleanup EXIT
prefix="${work}/prefix"

kolo_log "install ${build_dir} into ${prefix}"
kolo_run cmake --install "${build_dir}" --prefix "${prefix}" >"${work}/install.log" \
  || { cat "${work}/install.log"; exit 1; }

# What a user relies on must be there (the lib dir is lib/ or lib/<multiarch>/).
fail() { kolo_log "FAIL: $*"; exit 1; }
for f in include/kolo/kolo.h include/kolo/config.h; do
  [[ -f "${prefix}/${f}" ]] || fail "${f} not installed"
done
pc_file="$(find "${prefix}" -name kolo.pc -path '*/pkgconfig/*' | head -n 1)"
config_file="$(find "${prefix}" -name koloConfig.cmake -path '*/cmake/kolo/*' | head -n 1)"
[[ -n "${pc_file}" ]] || fail "kolo.pc not installed"
[[ -n "${config_file}" ]] || fail "koloConfig.cmake not installed"
libdir="$(dirname "$(dirname "${pc_file}")")"
[[ -L "${libdir}/libkolo.so" ]] || fail "${libdir}/libkolo.so (dev link) missing"
soname="$(objdump -p "${libdir}/libkolo.so" | awk '/SONAME/ {print $2}')"
[[ "${soname}" =~ ^libkolo\.so\.[0-9]+$ && -e "${libdir}/${soname}" ]] \
  || fail "SONAME '${soname}' of libkolo.so is not libkolo.so.<major> in ${libdir}"
# Only the C API is exported (bindings/c/kolo.map).
leaked="$(nm -D --defined-only "${libdir}/libkolo.so" | awk '{print $3}' \
  | grep -v -e '^kolo_' -e '^KOLO_0$' | head -n 5 || true)"
[[ -z "${leaked}" ]] || fail "libkolo.so exports non-kolo_ symbols: ${leaked//$'\n'/ }"
exported="$(nm -D --defined-only "${libdir}/libkolo.so" | grep -c ' kolo_')"
# MPI is in the plugin beside it, which exports only its entry (runtime/world/mpi_plugin.h);
# libkolo.so itself needs no MPI library, so a start without MPI loads none.
mpi_needed="$(objdump -p "${libdir}/libkolo.so" | awk '/NEEDED/ {print $2}' \
  | grep -E '^lib(mpi|open-pal|open-rte|pmix)' || true)"
[[ -z "${mpi_needed}" ]] || fail "libkolo.so needs ${mpi_needed//$'\n'/ }"
[[ -f "${libdir}/libkolo_mpi.so" ]] || fail "${libdir}/libkolo_mpi.so (the MPI plugin) missing"
plugin_exports="$(nm -D --defined-only "${libdir}/libkolo_mpi.so" | awk '{print $3}' \
  | grep -v -e '^kolo_mpi_plugin_v1' -e '^KOLO_MPI_0$' | head -n 5 || true)"
[[ -z "${plugin_exports}" ]] || fail "libkolo_mpi.so exports ${plugin_exports//$'\n'/ }"
kolo_log "installed: ${soname}, ${exported} kolo_* symbols, and libkolo_mpi.so"

kolo_log "1/2: CMake consumer (find_package(kolo))"
kolo_run cmake -S "${KOLO_ROOT}/tests/install" -B "${work}/consumer" \
  -DCMAKE_PREFIX_PATH="${prefix}" -DCMAKE_BUILD_TYPE=Release \
  -DKOLO_EXAMPLE_SOURCE="${example}" >"${work}/consumer.log" \
  || { cat "${work}/consumer.log"; exit 1; }
kolo_run cmake --build "${work}/consumer" >>"${work}/consumer.log" \
  || { cat "${work}/consumer.log"; exit 1; }

kolo_log "2/2: pkg-config consumer (mpicc)"
PKG_CONFIG_PATH="$(dirname "${pc_file}")${PKG_CONFIG_PATH:+:${PKG_CONFIG_PATH}}"
export PKG_CONFIG_PATH
read -r -a kolo_flags <<<"$(pkg-config --cflags --libs kolo)"
kolo_run mpicc -std=c99 -Wall -Wextra -Werror "${example}" "${kolo_flags[@]}" -lm \
  -Wl,-rpath,"$(pkg-config --variable=libdir kolo)" -o "${work}/pkgconfig_example"

# The binaries must pick up the installed library, not the build tree's.
for exe in "${work}/consumer/kolo_install_consumer" "${work}/pkgconfig_example"; do
  resolved="$(ldd "${exe}" | awk '/libkolo\.so/ {print $3}')"
  [[ "$(realpath "${resolved}")" == "$(realpath "${libdir}")"/* ]] \
    || fail "${exe} resolves libkolo to '${resolved}', not ${libdir}"
  kolo_run timeout 120 mpirun "${KOLO_MPIRUN_FLAGS[@]}" -np 2 "${exe}"
done
# The installed tools run from the prefix: their RPATH ($ORIGIN/../lib) finds the installed
# libkolo.so, not the build tree's.
bindir="${prefix}/bin"
for tool in kolo-bench kolo-topo kolo-scale; do
  [[ -x "${bindir}/${tool}" ]] || fail "${tool} not installed in ${bindir}"
  "${bindir}/${tool}" --help >/dev/null || fail "installed ${tool} --help failed"
done
resolved="$(ldd "${bindir}/kolo-bench" | awk '/libkolo\.so/ {print $3}')"
[[ "$(realpath "${resolved}")" == "$(realpath "${libdir}")"/* ]] \
  || fail "installed kolo-bench resolves libkolo to '${resolved}', not ${libdir}"
kolo_log "installed kolo-bench: a checked all-reduce sweep at 2 ranks"
kolo_run timeout 120 mpirun "${KOLO_MPIRUN_FLAGS[@]}" -np 2 "${bindir}/kolo-bench" \
  -b 8 -e 4K -f 8 -n 2 -w 1 -R 1 --check >"${work}/bench.log" \
  || { cat "${work}/bench.log"; fail "installed kolo-bench failed"; }
kolo_log "installed kolo-topo: the 4-GPU fixture"
"${bindir}/kolo-topo" --xml "${KOLO_ROOT}/tests/fixtures/topologies/pcie-gen4-2s-4gpu.xml" \
  >"${work}/topo.log" || { cat "${work}/topo.log"; fail "installed kolo-topo failed"; }
grep -q "GPUs: 4" "${work}/topo.log" || { cat "${work}/topo.log"; fail "kolo-topo saw no 4 GPUs"; }
kolo_log "installed kolo-scale: ResNet-50 on 2 nodes of the 4-GPU fixture"
"${bindir}/kolo-scale" --xml "${KOLO_ROOT}/tests/fixtures/topologies/pcie-gen4-2s-4gpu.xml" \
  --model resnet50 --ranks 8 --json >"${work}/scale.log" \
  || { cat "${work}/scale.log"; fail "installed kolo-scale failed"; }
grep -q '"algorithm":"auto".*"nodes":2' "${work}/scale.log" \
  || { cat "${work}/scale.log"; fail "kolo-scale printed no auto row for 2 nodes"; }
# Without its plugin, the installed libkolo.so fails kolo_init under mpirun naming the file it
# looked for, on every rank, instead of crashing or loading another build's.
mv "${libdir}/libkolo_mpi.so" "${work}/libkolo_mpi.so.away"
if timeout 120 mpirun "${KOLO_MPIRUN_FLAGS[@]}" -np 2 "${work}/pkgconfig_example" \
    >"${work}/noplugin.log" 2>&1; then
  cat "${work}/noplugin.log"
  fail "kolo_init succeeded without libkolo_mpi.so"
fi
want="cannot open kolo's MPI support '[^']*/lib/libkolo_mpi.so': .*No such file"
[[ "$(grep -c -E "${want}" "${work}/noplugin.log")" == 2 ]] \
  || { cat "${work}/noplugin.log"; fail "not every rank said: ${want}"; }
mv "${work}/libkolo_mpi.so.away" "${libdir}/libkolo_mpi.so"
kolo_log "install test passed"
