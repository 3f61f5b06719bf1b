#!/usr/bin/env bash
# kolo with the newest torch from PyPI, as a pip user gets it (the README's test command covers
# Debian's torch 1.13 from the build tree). In a virtual environment made from Debian's
# /usr/bin/python3 without Debian's packages, it installs torch, numpy, scikit-learn and pytest
# from PyPI, makes kolo's sdist (`python -m build --sdist`) and installs it, so the sdist is
# checked too; then, launched with kolorun, the pytest suite of kolo.torch at 2 and 3 ranks (and
# its Adasum files at 4), the main job and kolo-bench, kolo-topo and kolo-scale; the main job
# again under this torch's torchrun at 2 and 3 ranks (no MPI), and the DDP example on the backend
# "kolo" (checked against gloo) the same way, a group of backend "kolo" made with no import of
# kolo (torch's entry point), and Ctrl-C on torchrun (no rank left behind); the CNN's DDP check;
# last, `pip uninstall kolo` must leave nothing behind. It ends with the versions, for
# docs/compatibility.md. Non-zero on any failure.
#
# Usage: scripts/test_torch_versions.sh [torch requirement, default "torch": the newest]
# Environment: KOLO_TORCH_VENV (default build/torch-venv/; kept between runs, so pip's cache and
#              the installed torch make a second run short), KOLO_SKIP_APT=1 as for setup.sh.
set -euo pipefail

# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "${KOLO_ROOT}"

start=${SECONDS}
torch_req="${1:-torch}"
venv="${KOLO_TORCH_VENV:-${KOLO_ROOT}/build/torch-venv}"
sdist_dir="${KOLO_ROOT}/build/sdist"
kolo_install_packages "${KOLO_PACKAGES[@]}"
if [[ ! -x "${venv}/bin/python" ]]; then
  kolo_run /usr/bin/python3 -m venv "${venv}"
fi
pip=("${venv}/bin/python" -m pip --disable-pip-version-check)
kolo_run "${pip[@]}" install --upgrade "${torch_req}" numpy scikit-learn pytest build
rm -rf "${sdist_dir}"
kolo_run "${venv}/bin/python" -m build --sdist --outdir "${sdist_dir}" "${KOLO_ROOT}"
kolo_run "${pip[@]}" install --force-reinstall --no-deps "${sdist_dir}"/kolo-*.tar.gz
kolo_log "venv ready in $((SECONDS - start)) s"

# Outside the repository, so `import kolo` is the installed package.
cd /
export PATH="${venv}/bin:${PATH}" PYTHONDONTWRITEBYTECODE=1
tests="${KOLO_ROOT}/tests/python"
for np in 2 3; do
  kolo_run kolorun -np "${np}" python -m pytest -x -q -p no:cacheprovider "${tests}"
done
kolo_run kolorun -np 4 python -m pytest -x -q -p no:cacheprovider "${tests}/test_adasum.py" \
  "${tests}/test_adasum_optimizer.py"
kolo_run kolorun -np 2 python "${KOLO_ROOT}/examples/train_digits.py"
# Without MPI, as torchrun starts it (this torch's torchrun; Debian's fails on Python 3.11).
for np in 2 3; do
  kolo_run torchrun --standalone --nproc_per_node "${np}" "${KOLO_ROOT}/examples/train_digits.py"
  # DDP on the torch.distributed backend "kolo", checked against DDP over gloo.
  kolo_run torchrun --standalone --nproc_per_node "${np}" "${KOLO_ROOT}/examples/ddp_digits.py" \
    --compare gloo
  # The backend found through kolo's entry point, with no import of kolo (torch >= 2.14).
  kolo_run torchrun --standalone --nproc_per_node "${np}" \
    "${KOLO_ROOT}/tests/launch/torch_entry_point.py"
  # Ctrl-C on torchrun: its ranks, all-reducing, end within seconds and none is left behind.
  kolo_run python "${KOLO_ROOT}/tests/fault/run_fault.py" forever "${np}" \
    "${KOLO_ROOT}/tests/fault/kolo_fault.py" "$(command -v torchrun)"
done
# The CNN of bench/torch_step.py under DDP on kolo against gloo (losses), and its step times.
kolo_run kolorun -np 2 python "${KOLO_ROOT}/bench/ddp_step.py" --check --blocks 1 --steps 2
# The other console scripts: the wheel's executables, through their entry points.
kolo_run kolorun -np 2 kolo-bench -b 8 -e 64K -f 8 -n 3 -w 1
kolo_run kolo-topo >/dev/null
kolo_run kolo-scale --model resnet50 --ranks-per-node 1 --ranks 1,2 >/dev/null
kolo_run kolorun --check-build

versions="$(python - <<'PY'
import platform, numpy, sklearn, torch, kolo
print("Python %s, torch %s, numpy %s, scikit-learn %s, kolo %s"
      % (platform.python_version(), torch.__version__, numpy.__version__, sklearn.__version__,
         kolo.__version__))
PY
)"

# pip uninstall leaves nothing of kolo behind.
kolo_run "${pip[@]}" uninstall -y kolo
left="$(find "${venv}" -path '*/site-packages/kolo*' -o -name 'kolorun' -o -name 'kolo-bench' \
  -o -name 'kolo-topo' -o -name 'kolo-scale' | head -n 5)"
if [[ -n "${left}" ]]; then
  kolo_log "pip uninstall kolo left: ${left}"
  exit 1
fi

kolo_log "passed in $((SECONDS - start)) s with ${versions}"
