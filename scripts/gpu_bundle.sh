#!/usr/bin/env bash
# Builds kolo for a GPU machine that has CUDA and PyTorch but not kolo's build dependencies (MPI,
# hwloc, UCX, FlatBuffers, spdlog) and no network to fetch them, and bundles what
# scripts/gpu_check.sh runs into one folder to copy there:
#   build-gpu-bundle/  tests/kolo_gpu_tests, tests/kolo-gpu-check, bench/kolo-bench, python/kolo
#                      (the extension built for that machine's Python), lib/ (libkolo and every
#                      shared library these load that is not the C and C++ runtime or the
#                      driver's), lib/openmpi/ (Open MPI's components, which MPI_Init opens by
#                      path), lib/ucx/ and lib/pmix/ (UCX's and PMIx's modules, found beside
#                      libucs and libpmix), share/openmpi (Open MPI's messages), BUNDLE (how it was made; gpu_check.sh reads it).
# Debug information is stripped (the bundle must stay small enough to copy); line tables stay in
# build-gpu/ here for reading a backtrace.
# There, `KOLO_GPU_BUILD_DIR=build-gpu-bundle scripts/gpu_check.sh` runs every stage on the
# bundle instead of building: MPI starts as a singleton (no mpirun there), kolo's libraries come
# from lib/ (LD_LIBRARY_PATH), NCCL from that machine (its toolkit or PyTorch's nvidia-nccl wheel).
#
# Usage: scripts/gpu_bundle.sh [--arch SM] [--python PYTHON]
#   --arch    the GPU's compute capability without the dot (90: H100, H200); default 90
#   --python  an interpreter of the GPU machine's Python version (its major.minor decides the
#             extension's name); default /usr/bin/python3. pybind11 is its own, else fetched
#             with its pip into build-gpu/pybind11.
set -euo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "${KOLO_ROOT}"

arch=90
py=/usr/bin/python3
while (($#)); do
  case "$1" in
    --arch) arch="$2"; shift 2 ;;
    --python) py="$2"; shift 2 ;;
    *) echo "usage: $0 [--arch SM] [--python PYTHON]" >&2; exit 2 ;;
  esac
done
readonly build=build-gpu bundle=build-gpu-bundle
nvcc=/usr/local/cuda/bin/nvcc
[[ -x "${nvcc}" ]] || { echo "gpu_bundle: no ${nvcc} (the CUDA toolkit)" >&2; exit 1; }

kolo_install_packages "${KOLO_PACKAGES[@]}"
pybind11_dir="$("${py}" -m pybind11 --cmakedir 2>/dev/null ||
  PYTHONPATH="${build}/pybind11" "${py}" -m pybind11 --cmakedir 2>/dev/null || true)"
if [[ -z "${pybind11_dir}" ]]; then
  kolo_run "${py}" -m pip install -q --target "${build}/pybind11" pybind11
  pybind11_dir="$(PYTHONPATH="${build}/pybind11" "${py}" -m pybind11 --cmakedir)"
fi
kolo_run cmake -S . -B "${build}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" -DKOLO_WITH_CUDA=ON -DKOLO_WITH_NCCL=ON \
  -DCMAKE_CUDA_ARCHITECTURES="${arch}" -DKOLO_PYTHON="${py}" -Dpybind11_DIR="${pybind11_dir}" \
  -DMPIEXEC_PREFLAGS=--oversubscribe
kolo_run cmake --build "${build}" -j "${KOLO_BUILD_JOBS:-2}" --target kolo \
  kolo_gpu_tests kolo-gpu-check kolo-bench _kolo

rm -rf "${bundle}"
mkdir -p "${bundle}/tests" "${bundle}/bench" "${bundle}/lib/openmpi" "${bundle}/lib/ucx" \
  "${bundle}/lib/pmix"
binaries=(tests/kolo_gpu_tests tests/kolo-gpu-check bench/kolo-bench)
for b in "${binaries[@]}"; do
  objcopy --strip-debug "${build}/${b}" "${bundle}/${b}"
done
cp -r "${build}/python" "${bundle}/python"
find "${bundle}/python" -name '*.so' -exec strip --strip-debug {} +
for lib in "${build}"/libkolo.so.0 "${build}"/libkolo_mpi.so; do
  objcopy --strip-debug "$(readlink -f "${lib}")" "${bundle}/lib/$(basename "${lib}")"
done
readonly multiarch=/usr/lib/x86_64-linux-gnu
cp "${multiarch}"/openmpi/lib/openmpi3/*.so "${bundle}/lib/openmpi/"
cp "${multiarch}"/ucx/*.so.0 "${bundle}/lib/ucx/"
cp "${multiarch}"/pmix2/lib/pmix/*.so "${bundle}/lib/pmix/"
# Open MPI's messages (share/openmpi under OPAL_PREFIX): without them an error says only that
# its help file is missing.
mkdir -p "${bundle}/share"
cp -r /usr/share/openmpi "${bundle}/share/openmpi"

# Every library the bundle loads, by name, except the C and C++ runtime (that machine's are
# newer), the driver's, and NCCL (that machine's own: the one PyTorch uses).
system_libs='^(libc|libm|libpthread|libdl|librt|libutil|libresolv|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libnvidia-.*|libnccl)\.so'
mapfile -t objects < <(find "${bundle}" -type f \( -name '*.so*' -o -perm -u+x \) ! -name '*.py')
declare -A seen=()
for object in "${objects[@]}"; do
  while read -r name path; do
    [[ -z "${path}" || "${path}" == "not" || -n "${seen[${name}]:-}" ]] && continue
    seen[${name}]=1
    [[ "${name}" =~ ${system_libs} || "${name}" == libkolo* ]] && continue
    cp -L "${path}" "${bundle}/lib/${name}"
  done < <(LD_LIBRARY_PATH="${bundle}/lib" ldd "${object}" 2>/dev/null |
    awk '$2 == "=>" { print $1, $3 }')
done
# UCX finds its modules in ucx/ beside libucs, PMIx in pmix/ beside libpmix.
{
  echo "built: $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname), commit $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (with changes)')"
  echo "arch: sm_${arch}"
  echo "cuda: $("${nvcc}" --version | tail -1)"
  echo "python: $("${py}" -c 'import sys; print(sys.version.split()[0])')"
  echo "nccl.h: $(grep -hE '#define NCCL_(MAJOR|MINOR|PATCH) ' /usr/local/cuda/include/nccl.h 2>/dev/null | awk '{printf "%s ", $3}')"
} >"${bundle}/BUNDLE"
kolo_log "bundle: ${bundle}/ ($(du -sh "${bundle}" | cut -f1), $(find "${bundle}/lib" -maxdepth 1 -name '*.so*' | wc -l) libraries)"
