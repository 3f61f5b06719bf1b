#!/usr/bin/env bash
# The GPU check: one prepared script for a machine with a GPU, e.g. the lent H200 (run
# through the device tool as one command; nvcc and PyTorch are there, no network). It must end
# in under 8 minutes and prints its summary table last.
#   1. the device, as nvidia-smi sees it;
#   2. a CUDA build for this GPU's architecture: the whole project (build-gpu/) when kolo's
#      build dependencies are installed (MPI, hwloc, FlatBuffers, spdlog, GoogleTest, ...),
#      then `ctest -L gpu`, the `kolo-bench --device cuda` sweep and its `--model resnet50`
#      and `--model bert-base` replays (kolo vs raw NCCL per tensor and fused, and the
#      pack/unpack kernels against a device copy); and always the GPU parts alone, compiled with nvcc into
#      kolo-gpu-check (needs only CUDA, and NCCL for its NCCL rows: nccl.h and libnccl.so.2
#      from the toolkit or from the nvidia-nccl Python wheel that PyTorch brings);
#   3. kolo-gpu-check (tests/gpu/gpu_check_main.cc): pack/unpack kernels against the host kernel,
#      their bandwidth on the ResNet-50 layout against cudaMemcpy, NCCL through kolo on one rank
#      against the raw ncclAllReduce, kolo's NCCL all-gather / all-to-all / reduce-scatter on one
#      rank (with the full build, step 2 also runs tests/python/test_cuda.py at one rank);
#   4. the table, also written to $OUT/gpu_check.md when $OUT is set (the device tool's folder)
#      or build-gpu/gpu_check.md.
# Results go to docs/benchmarks.md ("GPU"), with the card, driver and date.
#
# Usage: scripts/gpu_check.sh        Environment: KOLO_GPU_ARCH (e.g. 90; default: nvidia-smi's)
set -uo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "${KOLO_ROOT}"

readonly started=$SECONDS
readonly out_dir="${OUT:-${KOLO_ROOT}/build-gpu}"
mkdir -p "${out_dir}" build-gpu
readonly summary="${out_dir}/gpu_check.md"
rows=()
row() { rows+=("| $1 | $2 | $3 |"); }
elapsed() { echo "$((SECONDS - started)) s"; }

# ---- 1. the device --------------------------------------------------------------------------
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi >/dev/null 2>&1; then
  row "GPU" "none" "nvidia-smi finds no GPU: nothing to check here"
  device="none"
else
  device="$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
  row "GPU" "found" "${device}, $(date -u +%Y-%m-%d)"
fi
arch="${KOLO_GPU_ARCH:-}"
if [[ -z "${arch}" && "${device}" != "none" ]]; then
  arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')"
fi
arch="${arch:-90}"

# ---- 2a. the whole project, when its dependencies are here ----------------------------------
full_build=no
if command -v mpicc >/dev/null 2>&1 && pkg-config --exists hwloc 2>/dev/null &&
    command -v flatc >/dev/null 2>&1; then
  kolo_log "full build (build-gpu/, sm_${arch})"
  if cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKOLO_WITH_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES="${arch}" \
      "-DMPIEXEC_PREFLAGS=--oversubscribe" >build-gpu/configure.log 2>&1 &&
      cmake --build build-gpu -j "$(nproc)" --target kolo kolo_gpu_tests kolo-gpu-check \
        kolo-bench _kolo >build-gpu/build.log 2>&1; then
    full_build=yes
    if ctest --test-dir build-gpu -L gpu --output-on-failure --timeout 300 \
        >build-gpu/ctest.log 2>&1; then
      row "ctest -L gpu" "PASS" "$(grep -E 'tests passed' build-gpu/ctest.log | tail -1)"
    else
      row "ctest -L gpu" "FAIL" "$(grep -E 'tests passed|Failed' build-gpu/ctest.log | head -3 | tr '\n' ' ')"
    fi
    # kolo's runtime on device buffers against the raw ncclAllReduce, one rank per GPU.
    if timeout 240 mpirun --allow-run-as-root -np 1 build-gpu/bench/kolo-bench --device cuda \
        -b 1M -e 1G -f 4 -n 10 -w 3 -R 3 >build-gpu/bench-cuda.txt 2>&1; then
      row "kolo-bench --device cuda" "OK" "table in build-gpu/bench-cuda.txt (kolo/nccl column)"
    else
      row "kolo-bench --device cuda" "FAIL" "$(tail -2 build-gpu/bench-cuda.txt | tr '\n' ' ')"
    fi
    # kolo.torch on CUDA tensors: every collective against CPU references, one rank (NCCL needs
    # a GPU per rank).
    if timeout 180 env PYTHONPATH="build-gpu/python" mpirun --allow-run-as-root -np 1 \
        python3 -m pytest -x -q -p no:cacheprovider tests/python/test_cuda.py \
        >build-gpu/pytest-cuda.txt 2>&1; then
      row "kolo.torch on CUDA (pytest test_cuda.py, 1 rank)" "PASS" "$(tail -1 build-gpu/pytest-cuda.txt)"
    else
      row "kolo.torch on CUDA (pytest test_cuda.py, 1 rank)" "FAIL" "$(tail -2 build-gpu/pytest-cuda.txt | tr '\n' ' ')"
    fi
    # The model replays on the device: kolo's runtime against the raw ncclAllReduce per tensor
    # and fused, and the pack/unpack kernels on the layout against a device copy (the
    # target: >= 90% for ResNet-50). A minute each at most; a few seconds on an H200.
    for model in resnet50 bert-base; do
      log="build-gpu/bench-cuda-${model}.txt"
      if timeout 60 mpirun --allow-run-as-root -np 1 build-gpu/bench/kolo-bench --device cuda \
          --model "${model}" -n 20 -w 5 >"${log}" 2>&1; then
        row "kolo-bench --device cuda --model ${model}" "OK" \
          "$(grep -E '^# time ratio' "${log}" | sed 's/^# //'); $(grep -E '^#   pack ' "${log}" | sed 's/^#   //')"
      else
        row "kolo-bench --device cuda --model ${model}" "FAIL" "$(tail -2 "${log}" | tr '\n' ' ')"
      fi
    done
  else
    row "full build" "FAIL" "see build-gpu/configure.log, build-gpu/build.log"
  fi
else
  row "full build" "skipped" "kolo's build dependencies (MPI, hwloc, FlatBuffers) are not installed here"
fi

# ---- 2b. the GPU parts alone, with nvcc -----------------------------------------------------
check_bin=""
if [[ "${full_build}" == yes ]]; then
  check_bin="build-gpu/tests/kolo-gpu-check"
elif command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; then
  nvcc="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
  nccl_inc="" nccl_lib=""
  for d in /usr/local/cuda/include /usr/include; do
    [[ -f "${d}/nccl.h" ]] && nccl_inc="${d}" && break
  done
  py_nccl="$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null || true)"
  if [[ -z "${nccl_inc}" && -n "${py_nccl}" && -f "${py_nccl}/include/nccl.h" ]]; then
    nccl_inc="${py_nccl}/include"
  fi
  [[ -n "${py_nccl}" && -d "${py_nccl}/lib" ]] && nccl_lib="${py_nccl}/lib"
  with_nccl=0
  [[ -n "${nccl_inc}" ]] && with_nccl=1
  gen=build-gpu/min/generated
  mkdir -p "${gen}/kolo"
  printf '#define KOLO_WITH_CUDA 1\n#define KOLO_WITH_NCCL %s\n#define KOLO_WITH_UCX 0\n#define KOLO_WITH_PMIX 0\n#define KOLO_VERSION_STRING "gpu-check"\n' \
    "${with_nccl}" >"${gen}/kolo/config.h"
  srcs=(base/status.cc base/dtype.cc collectives/reduce.cc collectives/reduce_half.cc
    collectives/communicator.cc collectives/node_context.cc collectives/cuda/device.cc
    collectives/nccl/nccl_run.cc collectives/hierarchical_composition.cc fusion/cuda/device_pack.cu bench/models.cc
    tests/gpu/gpu_check_main.cc)
  ((with_nccl)) && srcs+=(collectives/nccl/nccl_lib.cc collectives/nccl/nccl_comm.cc
    collectives/nccl/nccl_communicator.cc collectives/nccl/nccl_allgatherv.cc
    collectives/nccl/nccl_alltoallv.cc collectives/nccl/nccl_reduce_scatter.cc
    collectives/nccl/nccl_plan.cc)
  kolo_log "nvcc build of kolo-gpu-check (sm_${arch}, NCCL ${with_nccl})"
  if "${nvcc}" -std=c++17 -O2 -arch="sm_${arch}" -I. -I"${gen}" ${nccl_inc:+-I"${nccl_inc}"} \
      "${srcs[@]}" -o build-gpu/min/kolo-gpu-check -ldl -lpthread >build-gpu/min/build.log 2>&1; then
    check_bin="build-gpu/min/kolo-gpu-check"
    row "nvcc build (GPU parts alone)" "OK" "sm_${arch}, NCCL headers: ${nccl_inc:-none}"
  else
    row "nvcc build (GPU parts alone)" "FAIL" "see build-gpu/min/build.log"
  fi
  [[ -n "${nccl_lib}" ]] && export LD_LIBRARY_PATH="${nccl_lib}:${LD_LIBRARY_PATH:-}"
else
  row "nvcc build" "skipped" "no nvcc"
fi

# ---- 3. kolo-gpu-check ----------------------------------------------------------------------
check_table=""
if [[ -n "${check_bin}" ]]; then
  kolo_log "running ${check_bin}"
  check_table="$(timeout 300 "${check_bin}" 2>build-gpu/gpu_check.stderr)"
  rc=$?
  row "kolo-gpu-check" "$([[ ${rc} == 0 ]] && echo PASS || echo "FAIL (${rc})")" "its rows below; stderr in build-gpu/gpu_check.stderr"
fi
[[ "${full_build}" == yes ]] || row "kolo-bench --device cuda (sweep, --model), kolo.torch on CUDA" "skipped" "need the full build (MPI)"
row "time" "$(elapsed)" "whole script"

# ---- 4. the table, last ---------------------------------------------------------------------
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
} >"${summary}"
cat "${summary}"
