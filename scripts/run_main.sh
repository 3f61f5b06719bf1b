#!/usr/bin/env bash
# The main job on a fresh machine, as a user runs it: kolo installed with pip, launched with
# kolorun. It installs the Debian packages that are missing, makes a virtual environment from
# Debian's /usr/bin/python3 that sees Debian's torch (--system-site-packages), runs
# `pip install .` there (scikit-build-core builds libkolo.so and the extension; pyproject.toml),
# then `kolorun -np 2 python examples/train_digits.py`: data-parallel training on real data
# (scikit-learn's bundled handwritten digits, an MLP, kolo.torch.DistributedOptimizer). It prints
# the test accuracy each epoch and ends with the check that every rank holds the same parameters,
# equal to a single-process run over the same global batches; it exits non-zero if that check
# fails or the accuracy stays under 90%.
#
# Usage: scripts/run_main.sh [extra train_digits.py arguments]
# Environment: KOLO_VENV (default .venv/ in the repository), KOLO_NP (ranks, default 2),
#              KOLO_SKIP_APT=1 as for scripts/setup.sh. pip builds in a temporary folder, so
#              every run builds kolo again (about 2.5 minutes on 2 cores).
set -euo pipefail

# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "${KOLO_ROOT}"

start=${SECONDS}
kolo_install_packages "${KOLO_PACKAGES[@]}"
venv="${KOLO_VENV:-${KOLO_ROOT}/.venv}"
if [[ ! -x "${venv}/bin/python" ]]; then
  kolo_run /usr/bin/python3 -m venv --system-site-packages "${venv}"
fi
kolo_run "${venv}/bin/python" -m pip install --disable-pip-version-check "${KOLO_ROOT}"
kolo_log "installed in ${venv} in $((SECONDS - start)) s"

# Outside the repository, so `import kolo` finds the installed package and nothing else.
cd /
export PATH="${venv}/bin:${PATH}"
kolo_log "main job: examples/train_digits.py, ${KOLO_NP:-2} ranks"
kolo_run kolorun -np "${KOLO_NP:-2}" python "${KOLO_ROOT}/examples/train_digits.py" "$@"
