#!/usr/bin/env bash
# scripts/gpu_check.sh as a dry run (KOLO_GPU_CHECK_DRY_RUN=1: no GPU, whatever the machine
# has): it must list every stage with what it would run, build nothing, and exit 0; its table
# goes to $OUT. Fails naming the first stage missing from the table.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "${out}"' EXIT
touch "${out}/stamp"
OUT="${out}" KOLO_GPU_CHECK_DRY_RUN=1 timeout 120 "${root}/scripts/gpu_check.sh" \
  >"${out}/stdout" 2>&1 || {
  echo "gpu_check.sh exited $? in a dry run:"
  cat "${out}/stdout"
  exit 1
}
table="${out}/gpu_check.md"
[[ -f "${table}" ]] || { echo "no table at \$OUT/gpu_check.md"; exit 1; }
for stage in '^\| GPU \| none \|' '^\| versions \|' '^\| full build \(sm_[0-9]+\) \| skipped \|' \
    '^\| GPU gtests \(kolo_gpu_tests\) \| skipped \|' \
    '^\| compute-sanitizer memcheck \(pack, fused all-reduce\) \| skipped \|' \
    '^\| nvcc build of kolo-gpu-check \(GPU parts alone\) \| skipped \|' \
    '^\| kolo-gpu-check \| skipped \|' \
    '^\| kolo\.torch and its torch\.distributed backend on CUDA \(tests/python/test_cuda\.py, test_torch_distributed_devices\.py, 1 rank\) \| skipped \|' \
    '^\| kolo-bench --device cuda \(sweep\) \| skipped \|' \
    '^\| kolo-bench --device cuda --model resnet50 \| skipped \|' \
    '^\| kolo-bench --device cuda --model bert-base \| skipped \|' \
    '^dry run: no GPU checked here, nothing was run$'; do
  grep -qE -- "${stage}" "${table}" || { echo "missing from the table: ${stage}"; cat "${table}"; exit 1; }
done
# Each skipped stage says what it would have run.
without="$(grep -F '| skipped |' "${table}" | grep -vE 'would (run|configure|compile)' || true)"
[[ -z "${without}" ]] || { echo "a skipped stage without what it would run: ${without}"; exit 1; }
# Nothing was built: no file under build-gpu/ is newer than the run.
if [[ -d "${root}/build-gpu" ]] && [[ -n "$(find "${root}/build-gpu" -newer "${out}/stamp" -print -quit)" ]]; then
  echo "the dry run wrote under build-gpu/: $(find "${root}/build-gpu" -newer "${out}/stamp" | head -3)"
  exit 1
fi
# With a bundle (scripts/gpu_bundle.sh) named by KOLO_GPU_BUILD_DIR: listed, not built, and the
# stages would run its binaries.
bundle="${out}/bundle"
mkdir -p "${bundle}/lib"
printf 'built: test\narch: sm_90\npython: 3.12.1\n' >"${bundle}/BUNDLE"
rm -f "${table}"
OUT="${out}" KOLO_GPU_CHECK_DRY_RUN=1 KOLO_GPU_BUILD_DIR="${bundle}" timeout 120 \
  "${root}/scripts/gpu_check.sh" >"${out}/stdout" 2>&1 || {
  echo "gpu_check.sh exited $? in a dry run with a bundle:"
  cat "${out}/stdout"
  exit 1
}
for stage in '^\| bundle .* \| skipped \| no GPU; would run the stages below on it: built: test' \
    "^\\| GPU gtests \\(kolo_gpu_tests\\) \\| skipped \\| .*would run: ${bundle}/tests/kolo_gpu_tests"; do
  grep -qE -- "${stage}" "${table}" || { echo "missing from the table: ${stage}"; cat "${table}"; exit 1; }
done
echo "gpu_check.sh dry run: $(grep -cF '| skipped |' "${table}") stages listed as skipped, exit 0 (also with a bundle)"
