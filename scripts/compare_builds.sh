#!/usr/bin/env bash
# Before/after performance of two commits, as docs/benchmarks.md asks for: builds kolo-bench of
# BASE (a git revision) in a worktree beside the current build, then runs each measurement on
# both binaries in turn, ROUNDS times (base, current, current, base, ...), and prints per row the
# median and the best of each binary's per-run times and their ratios (current / base: below 1
# is faster). The best is there because step times on a small oversubscribed machine are
# bimodal (docs/benchmarks.md): a median of few runs can land in either mode.
#
# The measurements, at 2 ranks: the model replays through the whole runtime (ResNet-50,
# BERT-base and 1000 tiny tensors: negotiation, fusion, the selected algorithm; ResNet-50 and
# BERT-base with Sum and with Average, Horovod's default, which scales every result), the sweep
# through the runtime, and every all-reduce algorithm on its own (-a all). The -a all rows
# MPI_Allreduce and memcpy run the same code in both binaries: their ratios show the noise.
#
# Usage: scripts/compare_builds.sh BASE [ROUNDS] [OUT] [RUNS]   (default 7 rounds, all runs:
#        ~20 minutes with the base's build; RUNS: some of "resnet50 bert-base resnet50-avg
#        bert-base-avg tiny-1000 sweep algorithms", quoted)
# Run it on an otherwise idle machine: the two binaries share its cores turn by turn.
set -euo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "${KOLO_ROOT}"
base="${1:?usage: scripts/compare_builds.sh BASE [ROUNDS] [OUT]}"
rounds="${2:-7}"
out="${3:-/tmp/kolo-compare-$(date +%Y%m%d-%H%M)}"
runs="${4:-resnet50 bert-base resnet50-avg bert-base-avg tiny-1000 sweep algorithms}"
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

measure() {  # measure NAME json|csv ARGS...: one result file per binary per round
  local name=$1 format=$2
  shift 2
  [[ " ${runs} " == *" ${name} "* ]] || return 0
  for ((r = 1; r <= rounds; ++r)); do
    # ABBA: which binary runs first alternates, so a drift of the machine or an advantage of
    # running first or second falls on both alike.
    local order=(0 1)
    ((r % 2 == 0)) && order=(1 0)
    for i in "${order[@]}"; do
      local stem="${out}/${name}-${labels[i]}-${r}"
      local result=(--json "${stem}.json")
      [[ ${format} == csv ]] && result=(--output "${stem}.csv")
      kolo_log "${name} round ${r} ${labels[i]}"
      timeout 900 mpirun "${KOLO_MPIRUN_FLAGS[@]}" -np 2 "${binaries[i]}" "$@" "${result[@]}" \
        > "${stem}.txt" 2>&1
    done
  done
}

measure resnet50 json --model resnet50 -n 20 -w 5 --paths kolo
measure bert-base json --model bert-base -n 5 -w 2 --paths kolo
measure resnet50-avg json --model resnet50 -n 20 -w 5 --paths kolo -o avg
measure bert-base-avg json --model bert-base -n 5 -w 2 --paths kolo -o avg
measure tiny-1000 json --model tiny-1000 -n 50 -w 5 --paths kolo
measure sweep json --paths kolo -b 8 -e 64M -f 8 -c 1
measure algorithms csv -a all --check -b 1K -e 16M -f 16

/usr/bin/python3 - "${out}" "${rounds}" "${runs}" <<'PY'
import csv, json, statistics, sys
out, rounds, runs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()

def rows(name, label, r):
    """(row key, time in us) of one run."""
    stem = "%s/%s-%s-%d" % (out, name, label, r)
    if name == "algorithms":
        with open(stem + ".csv") as f:
            lines = [l for l in f if not l.startswith("#")]
        for row in csv.DictReader(lines):
            if row["supported"] == "1":
                yield "%s B %s" % (row["bytes"], row["algorithm"]), float(row["time_us"])
        return
    with open(stem + ".json") as f:
        text = f.read()
    try:  # kolo-bench before JSON Lines: one document with "rows"
        rows = json.loads(text)["rows"]
    except (ValueError, KeyError):  # JSON Lines: a "run" record, "row" records, a "summary"
        # (a file of one line, the run record alone, parses as one document without "rows")
        try:
            rows = [r for r in map(json.loads, filter(str.strip, text.splitlines()))
                    if r.get("record") == "row"]
        except ValueError as e:
            sys.exit("compare_builds.sh: %s.json: not JSON Lines: %s" % (stem, e))
        if not rows:
            print("compare_builds.sh: %s.json: no rows (the run stopped before its first row?)"
                  % stem, file=sys.stderr)
    for row in rows:
        yield (row.get("model") or "%d B" % row["bytes"]) + " " + row["path"], row["time_us"]

print("%-10s %-28s %11s %11s %7s %11s %11s %7s" % (
    "run", "row", "base med", "cur med", "ratio", "base best", "cur best", "ratio"))
for name in runs:
    per = {}
    for label in ("base", "current"):
        for r in range(1, rounds + 1):
            for key, t in rows(name, label, r):
                per.setdefault(key, {}).setdefault(label, []).append(t)
    for key, t in per.items():
        if len(t.get("base", [])) != rounds or len(t.get("current", [])) != rounds:
            continue  # measured by one binary only (an algorithm the other lacks)
        bm, cm = statistics.median(t["base"]), statistics.median(t["current"])
        bb, cb = min(t["base"]), min(t["current"])
        print("%-10s %-28s %11.1f %11.1f %7.3f %11.1f %11.1f %7.3f" % (
            name, key, bm, cm, cm / bm, bb, cb, cb / bb))
PY
kolo_log "rows and JSON in ${out}"
