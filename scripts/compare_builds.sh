#!/usr/bin/env bash
# Before/after performance of two commits, as docs/benchmarks.md asks for: builds kolo-bench of
# BASE (a git revision) in a worktree beside the current build, then runs each measurement on
# both binaries in turn, ROUNDS times (base, current, base, current, ...), and prints per row the
# median of each binary's medians and their ratio (current / base: below 1 is faster).
#
# The measurements: the model replays through the whole runtime (ResNet-50, BERT-base and
# 1000 tiny tensors; negotiation, fusion, the selected algorithm) and the sweep of every
# all-reduce algorithm (-a all), at 2 ranks.
#
# Usage: scripts/compare_builds.sh BASE [ROUNDS] [OUT]   (default 5 rounds; ~15 minutes)
# Run it on an otherwise idle machine: the two binaries share its cores turn by turn.
set -euo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "${KOLO_ROOT}"
base="${1:?usage: scripts/compare_builds.sh BASE [ROUNDS] [OUT]}"
rounds="${2:-5}"
out="${3:-/tmp/kolo-compare-$(date +%Y%m%d-%H%M)}"
mkdir -p "${out}"
current="${KOLO_BUILD_DIR}/bench/kolo-bench"
[[ -x "${current}" ]] || { kolo_log "no ${current}: build first"; exit 1; }

# The base's binary, built once per revision, of the current build's type.
base_rev="$(git rev-parse --short "${base}")"
base_src="${out}/src-${base_rev}"
base_build="${out}/build-${base_rev}"
if [[ ! -x "${base_build}/bench/kolo-bench" ]]; then
  rm -rf "${base_src}"
  git worktree add --detach "${base_src}" "${base_rev}" > /dev/null
  build_type="$(sed -n "s/^CMAKE_BUILD_TYPE:STRING=//p" "${KOLO_BUILD_DIR}/CMakeCache.txt")"
  cmake -S "${base_src}" -B "${base_build}" -DCMAKE_BUILD_TYPE="${build_type:-RelWithDebInfo}" \
    > "${out}/base-configure.log"
  cmake --build "${base_build}" -j "$(nproc)" --target kolo-bench > "${out}/base-build.log"
  git worktree remove --force "${base_src}"
fi
binaries=("${base_build}/bench/kolo-bench" "${current}")
labels=(base current)

measure() {  # measure NAME ARGS...: one JSON per binary per round
  local name=$1
  shift
  for ((r = 1; r <= rounds; ++r)); do
    for i in 0 1; do
      kolo_log "${name} round ${r} ${labels[i]}"
      timeout 900 mpirun "${KOLO_MPIRUN_FLAGS[@]}" -np 2 "${binaries[i]}" "$@" \
        --json "${out}/${name}-${labels[i]}-${r}.json" > "${out}/${name}-${labels[i]}-${r}.txt" 2>&1
    done
  done
}

measure resnet50 --model resnet50 -n 20 -w 5 --paths kolo
measure bert-base --model bert-base -n 5 -w 2 --paths kolo
measure tiny-1000 --model tiny-1000 -n 50 -w 5 --paths kolo
measure sweep --paths kolo -b 8 -e 64M -f 8 -c 1

/usr/bin/python3 - "${out}" "${rounds}" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
print("%-10s %-24s %12s %12s %8s" % ("run", "row", "base (us)", "current (us)", "ratio"))
for name in ("resnet50", "bert-base", "tiny-1000", "sweep"):
    per = {}
    for label in ("base", "current"):
        for r in range(1, rounds + 1):
            with open("%s/%s-%s-%d.json" % (out, name, label, r)) as f:
                for row in json.load(f)["rows"]:
                    key = (row.get("model") or "%d B" % row["bytes"]) + " " + row["path"]
                    per.setdefault(key, {}).setdefault(label, []).append(row["time_us"])
    for key, t in per.items():
        b, c = statistics.median(t["base"]), statistics.median(t["current"])
        print("%-10s %-24s %12.1f %12.1f %8.3f" % (name, key, b, c, c / b))
PY
kolo_log "rows and JSON in ${out}"
