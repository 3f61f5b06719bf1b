#!/usr/bin/env bash
# The GPU check: one prepared command for a machine with a GPU (nvcc and PyTorch there, maybe no
# network), within a time budget (KOLO_GPU_CHECK_BUDGET_S, 540 s: a stage that would start
# after it is skipped, and each stage's limit is cut to what is left), every log under $OUT (or
# build-gpu/), the table rewritten after every stage so a run cut short still leaves one.
# Stages, in order:
#   1. the device and the versions (nvidia-smi, driver, nvcc, NCCL, torch);
#   2. the full build for this GPU's architecture (build-gpu/: kolo, kolo_gpu_tests,
#      kolo-gpu-check, kolo-bench, the Python module) when kolo's build dependencies are here
#      (MPI, hwloc, FlatBuffers); the missing ones are named;
#   3. the GPU gtests (kolo_gpu_tests: ranks as threads, no launcher);
#   4. compute-sanitizer memcheck over the pack kernels and the fused device all-reduce tests;
#   5. kolo-gpu-check: the pack/unpack kernels against the host kernel (with scale factors, so a
#      wrong kernel fails on one GPU), their bandwidth against cudaMemcpy, NCCL through kolo
#      against the raw call; built by the full build, else alone with nvcc (needs only CUDA,
#      and NCCL from the toolkit or from the nvidia-nccl wheel that PyTorch brings);
#   6. kolo.torch and its torch.distributed backend on CUDA tensors (tests/python/test_cuda.py
#      and test_torch_distributed_devices.py, one rank);
#   7. the device benchmarks (kolo-bench --device cuda: the sweep, the ResNet-50 and BERT-base
#      replays).
# Then the table (also $OUT/gpu_check.md). Exit status: on a machine with a GPU, non-zero when
# any stage failed or was skipped (a skipped stage checked nothing); without a GPU (a dry run)
# every stage is listed with what it would run, and the status is 0.
# Results go to docs/benchmarks.md ("GPU"), with the card, driver and date.
# A GPU machine without kolo's build dependencies and no network to fetch them gets a bundle
# made elsewhere (scripts/gpu_bundle.sh: build-gpu-bundle/, named by KOLO_GPU_BUILD_DIR): stage 2
# then checks the bundle instead of building, and the stages run its binaries with its libraries;
# MPI starts as a singleton (no mpirun there).
#
# Usage: scripts/gpu_check.sh        Environment: KOLO_GPU_ARCH (e.g. 90; default: nvidia-smi's),
#   KOLO_GPU_CHECK_BUDGET_S (540), KOLO_GPU_CHECK_DRY_RUN=1 (list the stages as on a machine
#   without a GPU, whatever is here), KOLO_GPU_BUILD_DIR (build-gpu, or a bundle),
#   KOLO_GPU_PYTHON (default: /usr/bin/python3 if it has torch, else python3 on PATH)
set -uo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "${KOLO_ROOT}" || exit 1

readonly started=$SECONDS
readonly budget="${KOLO_GPU_CHECK_BUDGET_S:-540}"
readonly out_dir="${OUT:-${KOLO_ROOT}/build-gpu}"
readonly build="${KOLO_GPU_BUILD_DIR:-build-gpu}"
# The Python with PyTorch: Debian's here, a virtual environment's on a GPU image.
py="${KOLO_GPU_PYTHON:-}"
if [[ -z "${py}" ]]; then
  for candidate in /usr/bin/python3 "$(command -v python3 || true)"; do
    [[ -x "${candidate}" ]] && "${candidate}" -c 'import torch' 2>/dev/null && py="${candidate}" && break
  done
fi
py="${py:-/usr/bin/python3}"
mkdir -p "${out_dir}"
readonly summary="${out_dir}/gpu_check.md"
rows=()
problems=0
gpu=no
device="none"
check_table=""

# The table as it stands; rewritten after every row.
write_summary() {
  {
    echo "## kolo GPU check, $(date -u '+%Y-%m-%d %H:%M UTC'), ${device}"
    echo
    echo "| step | result | detail |"
    echo "| --- | --- | --- |"
    printf '%s\n' "${rows[@]}"
    if [[ -n "${check_table}" ]]; then
      echo
      echo "${check_table}"
    fi
    echo
    if [[ "${gpu}" == yes ]]; then
      echo "problems (failed or skipped stages): ${problems}"
    else
      echo "dry run: no GPU checked here, nothing was run"
    fi
  } >"${summary}"
}
row() {
  rows+=("| $1 | $2 | $3 |")
  write_summary
}
left() { echo $((budget - (SECONDS - started))); }

# skip STAGE WHY: a stage that does not run. On a GPU machine that is a problem.
skip() {
  row "$1" "skipped" "$2"
  [[ "${gpu}" == yes ]] && problems=$((problems + 1))
  return 0
}

# stage NAME LOG SECONDS CMD...: runs CMD with its output in $out_dir/LOG, for at most SECONDS
# or what is left of the budget; PASS or FAIL.
stage() {
  local name="$1" log="${out_dir}/$2" limit="$3"
  shift 3
  local remaining
  remaining="$(left)"
  if ((remaining < 15)); then
    skip "${name}" "out of time (budget ${budget} s); would run: $*"
    return 0
  fi
  ((limit > remaining)) && limit="${remaining}"
  kolo_log "${name}"
  if timeout "${limit}" "$@" >"${log}" 2>&1; then
    row "${name}" "PASS" "$(tail -1 "${log}" | cut -c1-160) (log: $(basename "${log}"))"
  else
    local rc=$?
    row "${name}" "FAIL (${rc})" "$(tail -2 "${log}" | tr '\n' ' ' | cut -c1-200) (log: $(basename "${log}"))"
    problems=$((problems + 1))
  fi
}

# ---- 1. the device and the versions ---------------------------------------------------------
if [[ "${KOLO_GPU_CHECK_DRY_RUN:-0}" == 1 ]]; then
  row "GPU" "none" "KOLO_GPU_CHECK_DRY_RUN=1: a dry run, listing what each stage would run"
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >"${out_dir}/nvidia-smi.txt" 2>&1; then
  gpu=yes
  device="$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
  row "GPU" "found" "${device}, $(date -u +%Y-%m-%d)"
elif [[ -e /proc/driver/nvidia/version || -e /dev/nvidiactl ]]; then
  # A driver without a working nvidia-smi (e.g. a driver/library version mismatch) is a GPU
  # machine that cannot be checked: a failure, not a dry run.
  gpu=yes
  device="NVIDIA driver present, nvidia-smi failing"
  row "GPU" "FAIL" "$(head -1 "${out_dir}/nvidia-smi.txt" 2>/dev/null | cut -c1-160)"
  problems=$((problems + 1))
else
  row "GPU" "none" "no NVIDIA driver or GPU: a dry run, listing what each stage would run"
fi
nvcc="$(command -v nvcc || { [[ -x /usr/local/cuda/bin/nvcc ]] && echo /usr/local/cuda/bin/nvcc; } || true)"
# NCCL's headers and library: the toolkit's, else the nvidia-nccl wheel's (a namespace package:
# its __file__ is None, its __path__ is the folder).
nccl_inc="" nccl_lib=""
for d in /usr/local/cuda/include /usr/include; do
  [[ -f "${d}/nccl.h" ]] && nccl_inc="${d}" && break
done
py_nccl="$("${py}" -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || true)"
[[ -z "${nccl_inc}" && -n "${py_nccl}" && -f "${py_nccl}/include/nccl.h" ]] && nccl_inc="${py_nccl}/include"
[[ -n "${py_nccl}" && -d "${py_nccl}/lib" ]] && nccl_lib="${py_nccl}/lib"
{
  echo "driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)"
  echo "nvcc: ${nvcc:-none} $([[ -n "${nvcc}" ]] && "${nvcc}" --version | tail -1)"
  echo "nccl.h: ${nccl_inc:-none} $(grep -hE '#define NCCL_(MAJOR|MINOR|PATCH) ' "${nccl_inc:-/dev/null}/nccl.h" 2>/dev/null | awk '{printf "%s ", $3}')"
  echo "nccl wheel: ${py_nccl:-none}"
  echo "python: ${py} $("${py}" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null)"
  echo "torch: $("${py}" -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>/dev/null || echo none)"
} >"${out_dir}/versions.txt"
row "versions" "$([[ ${gpu} == yes ]] && echo found || echo listed)" "$(tr '\n' ';' <"${out_dir}/versions.txt" | cut -c1-200)"
arch="${KOLO_GPU_ARCH:-}"
if [[ -z "${arch}" && "${gpu}" == yes ]]; then
  arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')"
fi
arch="${arch:-90}"
# The wheel's libnccl.so.2 is what kolo opens at run time, for every stage below.
[[ -n "${nccl_lib}" ]] && export LD_LIBRARY_PATH="${nccl_lib}:${LD_LIBRARY_PATH:-}"

# ---- 2. the full build ----------------------------------------------------------------------
missing=()
command -v cmake >/dev/null 2>&1 || missing+=("cmake")
command -v mpicc >/dev/null 2>&1 || missing+=("MPI (mpicc: libopenmpi-dev)")
pkg-config --exists hwloc 2>/dev/null || missing+=("hwloc (libhwloc-dev)")
command -v flatc >/dev/null 2>&1 || missing+=("FlatBuffers (flatc: flatbuffers-compiler)")
[[ -n "${nvcc}" ]] || missing+=("nvcc (the CUDA toolkit)")
[[ -n "${nccl_inc}" ]] || missing+=("NCCL (nccl.h: the toolkit's or the nvidia-nccl wheel's)")
# NCCL for CMake: the toolkit's is found as it is; the wheel ships only libnccl.so.2.
nccl_cmake=(-DKOLO_WITH_NCCL=ON)
if [[ -n "${nccl_inc}" && "${nccl_inc}" == "${py_nccl}/include" ]]; then
  nccl_cmake+=("-DNCCL_INCLUDE_DIR=${nccl_inc}" "-DNCCL_LIBRARY=${nccl_lib}/libnccl.so.2")
fi
full_build=no
full_why=""
if ((${#missing[@]})); then
  full_why="missing: $(IFS=','; echo "${missing[*]}")"
fi
build_cmd=(cmake --build "${build}" -j "$(nproc)" --target kolo kolo_gpu_tests kolo-gpu-check
  kolo-bench _kolo)
if [[ -f "${build}/BUNDLE" ]]; then
  # A bundle (scripts/gpu_bundle.sh): its libraries first, Open MPI's components and messages and PMIx's from
  # it, and MPI_Init as a singleton without a daemon (no orted there).
  bundle_arch="$(sed -n 's/^arch: sm_//p' "${build}/BUNDLE")"
  bundle_py="$(sed -n 's/^python: //p' "${build}/BUNDLE")"
  here_py="$("${py}" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true)"
  lib="$(cd "${build}/lib" && pwd)"
  export LD_LIBRARY_PATH="${lib}:${LD_LIBRARY_PATH:-}"
  export OMPI_MCA_mca_base_component_path="${lib}/openmpi"
  export PMIX_MCA_mca_base_component_path="${lib}/pmix"
  export OMPI_MCA_ess_singleton_isolated=1
  OPAL_PREFIX="$(cd "${build}" && pwd)"
  export OPAL_PREFIX
  if [[ "${gpu}" == no ]]; then
    skip "bundle ${build}/ (no build here)" "no GPU; would run the stages below on it: $(tr '\n' ';' <"${build}/BUNDLE" | cut -c1-160)"
    full_why="no GPU"
  elif [[ "${bundle_arch}" != "${arch}" ]]; then
    row "bundle ${build}/" "FAIL" "built for sm_${bundle_arch}, this GPU is sm_${arch}: $(tr '\n' ';' <"${build}/BUNDLE")"
    problems=$((problems + 1))
    full_why="the bundle is for another GPU"
  elif [[ "${bundle_py%.*}" != "${here_py}" ]]; then
    full_build=yes
    row "bundle ${build}/" "FAIL" "its extension is for Python ${bundle_py}, ${py} is ${here_py}: kolo.torch cannot load"
    problems=$((problems + 1))
  else
    full_build=yes
    row "bundle ${build}/ (no build here)" "found" "$(tr '\n' ';' <"${build}/BUNDLE" | cut -c1-200)"
  fi
elif [[ "${gpu}" == no ]]; then
  skip "full build (sm_${arch})" "no GPU; would configure ${build}/ with KOLO_WITH_CUDA=ON for this GPU's architecture and run: ${build_cmd[*]}${full_why:+ (and here: ${full_why})}"
  full_why="no GPU"
elif [[ -n "${full_why}" ]]; then
  skip "full build (sm_${arch})" "${full_why}"
else
  kolo_log "full build (${build}/, sm_${arch})"
  rm -f "${out_dir}/build.log"
  if ! timeout "$(left)" cmake -S . -B "${build}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DKOLO_WITH_CUDA=ON "${nccl_cmake[@]}" -DCMAKE_CUDA_ARCHITECTURES="${arch}" \
      -DPython_EXECUTABLE=/usr/bin/python3 -DMPIEXEC_PREFLAGS=--oversubscribe \
      >"${out_dir}/configure.log" 2>&1; then
    row "full build (sm_${arch})" "FAIL" "configure: $(grep -m1 -E 'Error|error' "${out_dir}/configure.log" | cut -c1-200) (configure.log)"
    problems=$((problems + 1))
    full_why="the full build's configure failed"
  elif ! timeout "$(left)" "${build_cmd[@]}" >"${out_dir}/build.log" 2>&1; then
    row "full build (sm_${arch})" "FAIL" "$(tail -2 "${out_dir}/build.log" | tr '\n' ' ' | cut -c1-200) (build.log)"
    problems=$((problems + 1))
    full_why="the full build failed"
  else
    full_build=yes
    row "full build (sm_${arch})" "PASS" "${build}/ (logs: configure.log, build.log)"
  fi
fi

# A stage that needs the full build: runs it, or says why not.
with_build() {
  local name="$1" log="$2" limit="$3"
  shift 3
  if [[ "${full_build}" == yes ]]; then
    stage "${name}" "${log}" "${limit}" "$@"
  else
    skip "${name}" "${full_why}; would run: $*"
  fi
}

# ---- 3. the GPU gtests ----------------------------------------------------------------------
with_build "GPU gtests (kolo_gpu_tests)" gpu-gtests.log 150 "${build}/tests/kolo_gpu_tests"
# A test that skipped checked nothing; only the two-GPU ones may, on a one-GPU machine.
if [[ -f "${out_dir}/gpu-gtests.log" ]]; then
  skipped_tests="$(grep -A1 -E ': Skipped$' "${out_dir}/gpu-gtests.log" |
    grep -vE ': Skipped$|^--$|needs two CUDA devices' | sort | uniq -c | tr '\n' ';')"
  if [[ -n "${skipped_tests}" ]]; then
    row "GPU gtests skipped" "FAIL" "${skipped_tests}"
    problems=$((problems + 1))
  fi
fi

# ---- 4. compute-sanitizer -------------------------------------------------------------------
sanitizer="$(command -v compute-sanitizer || { [[ -x /usr/local/cuda/bin/compute-sanitizer ]] && echo /usr/local/cuda/bin/compute-sanitizer; } || true)"
if [[ -z "${sanitizer}" && "${gpu}" == yes ]]; then
  skip "compute-sanitizer memcheck (pack, fused all-reduce)" "no compute-sanitizer in the toolkit"
else
  # --report-api-errors no: NCCL probes for kernel images of other GPUs and handles the error
  # itself (cudaErrorNoKernelImageForDevice at its init); memcheck's errors still count. Waits are
  # longer: every kernel NCCL loads is instrumented.
  with_build "compute-sanitizer memcheck (pack, fused all-reduce)" sanitizer.log 150 \
    env KOLO_TEST_WAIT_S=120 KOLO_START_TIMEOUT=120 \
    "${sanitizer:-compute-sanitizer}" --tool memcheck --report-api-errors no --error-exitcode 1 \
    "${build}/tests/kolo_gpu_tests" '--gtest_filter=GpuPack.*:GpuRuntime.FusedDeviceAllreduceWithScaling'
fi

# ---- 5. kolo-gpu-check ----------------------------------------------------------------------
check_bin=""
if [[ "${full_build}" == yes ]]; then
  check_bin="${build}/tests/kolo-gpu-check"
elif [[ "${gpu}" == no ]]; then
  skip "nvcc build of kolo-gpu-check (GPU parts alone)" "no GPU; would compile the CUDA and NCCL sources with ${nvcc:-nvcc} for sm_${arch}"
elif [[ -z "${nvcc}" ]]; then
  skip "nvcc build of kolo-gpu-check (GPU parts alone)" "no nvcc"
else
  with_nccl=0
  [[ -n "${nccl_inc}" ]] && with_nccl=1
  gen="${build}/min/generated"
  mkdir -p "${build}/min"
  mkdir -p "${gen}/kolo"
  printf '#define KOLO_WITH_CUDA 1\n#define KOLO_WITH_NCCL %s\n#define KOLO_WITH_UCX 0\n#define KOLO_WITH_PMIX 0\n#define KOLO_VERSION_STRING "gpu-check"\n' \
    "${with_nccl}" >"${gen}/kolo/config.h"
  srcs=(base/status.cc base/dtype.cc collectives/reduce.cc collectives/reduce_half.cc
    collectives/communicator.cc collectives/node_context.cc collectives/cuda/device.cc
    collectives/nccl/nccl_run.cc collectives/hierarchical_composition.cc fusion/cuda/device_pack.cu
    bench/models.cc tests/gpu/gpu_check_main.cc)
  ((with_nccl)) && srcs+=(collectives/nccl/nccl_lib.cc collectives/nccl/nccl_comm.cc
    collectives/nccl/nccl_communicator.cc collectives/nccl/nccl_allgatherv.cc
    collectives/nccl/nccl_alltoallv.cc collectives/nccl/nccl_reduce_scatter.cc
    collectives/nccl/nccl_plan.cc)
  kolo_log "nvcc build of kolo-gpu-check (sm_${arch}, NCCL ${with_nccl})"
  if "${nvcc}" -std=c++17 -O2 -arch="sm_${arch}" -I. -I"${gen}" ${nccl_inc:+-I"${nccl_inc}"} \
      "${srcs[@]}" -o "${build}/min/kolo-gpu-check" -ldl -lpthread >"${out_dir}/nvcc-build.log" 2>&1; then
    check_bin="${build}/min/kolo-gpu-check"
    row "nvcc build of kolo-gpu-check (GPU parts alone)" "PASS" "sm_${arch}, NCCL headers: ${nccl_inc:-none}"
    ((with_nccl)) || skip "NCCL rows of kolo-gpu-check" "no nccl.h (toolkit or nvidia-nccl wheel)"
  else
    row "nvcc build of kolo-gpu-check (GPU parts alone)" "FAIL" "see nvcc-build.log"
    problems=$((problems + 1))
  fi
fi
if [[ -n "${check_bin}" ]]; then
  kolo_log "running ${check_bin}"
  limit="$(left)"
  ((limit > 150)) && limit=150
  ((limit < 15)) && limit=15
  check_table="$(timeout "${limit}" "${check_bin}" 2>"${out_dir}/gpu_check.stderr")"
  rc=$?
  echo "${check_table}" >"${out_dir}/kolo-gpu-check.md"
  if [[ ${rc} == 0 ]]; then
    row "kolo-gpu-check" "PASS" "its rows below (stderr: gpu_check.stderr)"
  else
    row "kolo-gpu-check" "FAIL (${rc})" "its rows below (stderr: gpu_check.stderr)"
    problems=$((problems + 1))
  fi
  # A row the check itself skipped (e.g. NCCL absent) checked nothing either.
  if [[ "${gpu}" == yes ]] && grep -q '| skipped |' <<<"${check_table}"; then
    problems=$((problems + 1))
  fi
elif [[ "${gpu}" == yes ]]; then
  skip "kolo-gpu-check" "not built (see above)"
else
  skip "kolo-gpu-check" "no GPU; would run the kolo-gpu-check the full build or nvcc made"
fi

# ---- 6. kolo.torch on CUDA tensors ----------------------------------------------------------
with_build "kolo.torch and its torch.distributed backend on CUDA (tests/python/test_cuda.py, \
test_torch_distributed_devices.py, 1 rank)" pytest-cuda.log 180 \
  env PYTHONPATH="${build}/python" "${py}" -m pytest -x -q -p no:cacheprovider \
  tests/python/test_cuda.py tests/python/test_torch_distributed_devices.py

# ---- 7. the device benchmarks ---------------------------------------------------------------
# One rank: under mpirun where there is one, else MPI's singleton start (always with a bundle:
# an mpirun there is not the MPI it was built with).
one_rank=()
[[ ! -f "${build}/BUNDLE" ]] && command -v mpirun >/dev/null 2>&1 &&
  one_rank=(mpirun --allow-run-as-root -np 1)
with_build "kolo-bench --device cuda (sweep)" bench-cuda.txt 120 \
  "${one_rank[@]}" "${build}/bench/kolo-bench" --device cuda -b 1M -e 1G -f 4 \
  -n 10 -w 3 -R 3
for model in resnet50 bert-base; do
  log="bench-cuda-${model}.txt"
  with_build "kolo-bench --device cuda --model ${model}" "${log}" 60 \
    "${one_rank[@]}" "${build}/bench/kolo-bench" --device cuda --model "${model}" \
    -n 20 -w 5
  # The run's kolo/NCCL time ratios and its pack kernel line, for docs/benchmarks.md.
  if [[ "${full_build}" == yes && -f "${out_dir}/${log}" ]]; then
    row "  ${model}: ratios, pack" "-" "$(grep -E '^# time ratio' "${out_dir}/${log}" | sed 's/^# //'); $(grep -E '^#   pack ' "${out_dir}/${log}" | sed 's/^#   //')"
  fi
done
row "time" "$((SECONDS - started)) s" "whole script (budget ${budget} s)"
cat "${summary}"
[[ "${gpu}" == yes && ${problems} -gt 0 ]] && exit 1
exit 0
