#!/usr/bin/env bash
# The performance comparisons that a single run cannot settle, each repeated RUNS times (default
# 10), interleaved (one of each per round), with min / median / max over the runs, at 2 ranks:
#   1. all-reduce 1-64 MiB: every algorithm of kolo's table (`kolo-bench -a all`, which
#      interleaves them with MPI_Allreduce itself, median of 5 blocks) against MPI_Allreduce with
#      the malloc settings of docs/machine-notes.md 2, as MPI's time over kolo's (above 1: kolo
#      faster): shm, and the selector's pick (what `auto` runs);
#   2. 200 dependent all-reduces of 1 KiB through kolo.torch (bench/dependent_allreduce.py
#      --cpu-loop, which also times a fixed loop of Python on each rank before the run): the
#      total per run, and the worst run over the median run, over all rounds and over those
#      whose slower rank ran the loop within 1.25x of the fastest round (the host may give a
#      vCPU less for seconds at a time: docs/benchmarks.md, "Where a slow process's dependent
#      all-reduces spend their time");
#   3. a step's gradients of ResNet-50 and BERT-base as a Horovod user hands them over
#      (bench/gradient_set.py: allreduce_async_ in place, Average, last layer first, then
#      synchronize), the median step of each run, and its time over the memory floor measured
#      beside it in the same script (every tensor copied once, every rank at once);
#   4. the same sets through kolo-bench --model (path kolo: every tensor submitted at once out of
#      place through the C API, then all waited for), with Sum and with Average, over its own
#      floor (path memcpy).
# Every output is checked: kolo-bench -c 1 every element; the Python scripts their first and
# last timed results (gradient_set.py every element, dependent_allreduce.py each run's value).
# Each round's all-reduce comparison runs between two readings of kolo-core-probe
# (bench/core_probe.cc): a round where either reading handed a cache line between the cores in
# more than 120 ns ran in the machine's slow state (docs/machine-notes.md 11), and the all-reduce
# table gives the fast rounds' figures beside all rounds'.
#
# Usage: scripts/bench_performance.sh [--runs N] [--horovod PYTHON] [OUT]   (default OUT:
# /tmp/kolo-performance-<date>; relative paths are taken from the repository root); takes ~8
# minutes for 10 runs on a 2-core machine, ~12.5 with --horovod.
# --horovod PYTHON: an interpreter that imports horovod.torch (Horovod is not part of the project;
# docs/benchmarks.md says how it was built for the figures there). Every round then also runs 2
# and 3 through Horovod (--backend horovod, the malloc settings above, Horovod's defaults
# otherwise), interleaved with kolo's.
set -euo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "${KOLO_ROOT}"
runs=10 out="" horovod=""
while (($#)); do
  case "$1" in
    --runs)
      [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { kolo_log "--runs takes a positive number"; exit 2; }
      runs=$2
      shift 2
      ;;
    --horovod)
      [[ -n ${2:-} ]] || { kolo_log "--horovod takes a Python interpreter"; exit 2; }
      horovod=$2
      shift 2
      "${horovod}" -c "import horovod.torch" || {
        kolo_log "--horovod ${horovod}: cannot import horovod.torch"
        exit 2
      }
      ;;
    -*) kolo_log "bench_performance: unknown option $1"; exit 2 ;;
    *) out=$1; shift ;;
  esac
done
out="${out:-/tmp/kolo-performance-$(date +%Y%m%d-%H%M)}"
mkdir -p "${out}"
bench="${KOLO_BUILD_DIR}/bench/kolo-bench"
probe="${KOLO_BUILD_DIR}/bench/kolo-core-probe"
for tool in "${bench}" "${probe}"; do
  [[ -x "${tool}" ]] || { kolo_log "no ${tool}: run scripts/setup.sh first"; exit 1; }
done
export PYTHONPATH="${KOLO_BUILD_DIR}/python${PYTHONPATH:+:${PYTHONPATH}}"
tuned=(MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=17179869184 MALLOC_ARENA_MAX=1)
np=(timeout 600 mpirun "${KOLO_MPIRUN_FLAGS[@]}" -np 2)

# run FILE CMD...: CMD's output into FILE; a failure names the file and shows its end.
run() {
  local file=$1
  shift
  if ! "$@" > "${file}" 2>&1; then
    kolo_log "failed: $* (output in ${file}):"
    tail -n 20 "${file}" >&2
    exit 1
  fi
}

for ((r = 1; r <= runs; ++r)); do
  kolo_log "round ${r} of ${runs}"
  run "${out}/probe-${r}-before.json" "${probe}" --json
  run "${out}/allreduce-${r}.txt" env "${tuned[@]}" "${np[@]}" "${bench}" -a all -b 1M -e 64M \
    -f 4 -c 1 -R 5 --json "${out}/allreduce-${r}.json"
  run "${out}/probe-${r}-after.json" "${probe}" --json
  run "${out}/dependent-${r}.txt" "${np[@]}" /usr/bin/python3 bench/dependent_allreduce.py \
    --ops 200 --cpu-loop
  [[ -z ${horovod} ]] || run "${out}/dependent-horovod-${r}.txt" env "${tuned[@]}" "${np[@]}" \
    "${horovod}" bench/dependent_allreduce.py --ops 200 --cpu-loop --backend horovod
  for model in resnet50 bert-base; do
    run "${out}/set-${model}-${r}.txt" "${np[@]}" /usr/bin/python3 bench/gradient_set.py \
      --model "${model}" --kolo-bench "${bench}"
    [[ -z ${horovod} ]] || run "${out}/set-horovod-${model}-${r}.txt" env "${tuned[@]}" \
      "${np[@]}" "${horovod}" bench/gradient_set.py --model "${model}" --kolo-bench "${bench}" \
      --backend horovod
  done
  for model in resnet50 bert-base; do
    for op in sum avg; do
      run "${out}/${model}-${op}-${r}.txt" "${np[@]}" "${bench}" --model "${model}" \
        --paths kolo,memcpy -o "${op}" -n 10 -w 3 -c 1 --json "${out}/${model}-${op}-${r}.json"
    done
  done
done

/usr/bin/python3 - "${out}" "${runs}" "${horovod}" <<'PY'
import json, re, statistics, sys
out, runs, horovod = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def rows(path):
    return [json.loads(l) for l in open(path) if l.startswith("{")]
def mmm(values, fmt="%.2f"):
    return " / ".join(fmt % v for v in (min(values), statistics.median(values), max(values)))
ratios = {}  # size -> {"shm": [...], "pick": [...]}
fast = {}    # size -> shm's ratios in the rounds of the fast state
picks = {}   # size -> the selector's picks over the runs
states = []
for r in range(1, runs + 1):
    probes = [json.load(open("%s/probe-%d-%s.json" % (out, r, when)))
              for when in ("before", "after")]
    slow = max(p["pingpong_ns"] for p in probes) > 120
    states.append("%d %s (%s ns)" % (r, "slow" if slow else "fast",
                                     ", ".join("%.0f" % p["pingpong_ns"] for p in probes)))
    by = {}
    for row in rows("%s/allreduce-%d.json" % (out, r)):
        if row.get("record") == "row" and row.get("supported"):
            by.setdefault(row["bytes"], []).append(row)
    for size, rs in by.items():
        mpi = [x["time_us"] for x in rs if x["algorithm"] == "MPI_Allreduce"][0]
        for x in rs:
            if x["algorithm"] == "shm":
                ratios.setdefault(size, {}).setdefault("shm", []).append(mpi / x["time_us"])
                if not slow:
                    fast.setdefault(size, []).append(mpi / x["time_us"])
            if x.get("selected"):
                ratios.setdefault(size, {}).setdefault("pick", []).append(mpi / x["time_us"])
                picks.setdefault(size, set()).add(x["algorithm"])
print("## all-reduce, 2 ranks: MPI_Allreduce (malloc settings) time over kolo's, %d runs" % runs)
print("rounds (kolo-core-probe's hand-over before, after): " + "; ".join(states))
print("| size | shm min / median / max | fast rounds only | selector's pick | "
      "its min / median / max |")
print("|---:|---|---|---|---|")
for size in sorted(ratios):
    r = ratios[size]
    print("| %d MiB | %s | %s | %s | %s |" % (
        size >> 20, mmm(r["shm"]), mmm(fast[size]) if size in fast else "no fast round",
        ", ".join(sorted(picks.get(size, []))) or "none",
        mmm(r["pick"]) if "pick" in r else "not measured"))
# The runtimes measured: kolo, and Horovod with --horovod; each one's files are named with its
# suffix.
backends = [("kolo", "")] + ([("horovod", "-horovod")] if horovod else [])
def per_round(name, pattern):
    """The numbers `pattern` finds in each round's file `name` % r, one tuple per round."""
    return [tuple(float(g) for g in re.search(pattern, open(name % r).read()).groups())
            for r in range(1, runs + 1)]
for backend, suffix in backends:
    totals, loops = zip(*per_round(
        "%s/dependent%s-%%d.txt" % (out, suffix),
        r"ranks \d+ ops \d+ kib \d+ total_ms ([0-9.]+) .* cpu_loop_ms_max ([0-9.]+)"))
    med = statistics.median(totals)
    print("\n## 200 dependent all-reduces of 1 KiB, 2 ranks, %s: total ms per run" % backend)
    print("min / median / max %s; worst over median %.2f" % (mmm(totals, "%.1f"),
                                                            max(totals) / med))
    # The slower rank's loop of Python before each run: how fast the host let its cores run
    # then. Rounds within 1.25x of the run's fastest loop had their cores at full speed.
    full = [t for t, l in zip(totals, loops) if l <= 1.25 * min(loops)]
    print("rounds (total ms, slower rank's cpu loop ms): " + "; ".join(
        "%d %.1f (%.2f)" % (r + 1, t, l) for r, (t, l) in enumerate(zip(totals, loops))))
    print("rounds with the cores at full speed (loop <= 1.25x the fastest): %d; %s" % (
        len(full), "min / median / max %s, worst over median %.2f" % (
            mmm(full, "%.1f"), max(full) / statistics.median(full)) if full else "none"))
print("\n## gradient sets through Horovod's API (bench/gradient_set.py: allreduce_async_ in "
      "place, Average), 2 ranks: median step ms per run, and over the copy floor of the same run")
for model in ("resnet50", "bert-base"):
    by_backend = {}
    for backend, suffix in backends:
        steps, floors = zip(*per_round("%s/set%s-%s-%%d.txt" % (out, suffix, model),
                                       r"allreduce_ms ([0-9.]+) .* over_copy ([0-9.]+) wrong 0"))
        print("%s, %s: min / median / max %s ms; over the copies %s" % (
            model, backend, mmm(steps, "%.1f"), mmm(floors)))
        by_backend[backend] = steps
    if horovod:
        # Each round's kolo step over the Horovod step of the same round.
        print("%s, kolo over Horovod round by round: min / median / max %s" % (
            model, mmm([k / h for k, h in zip(by_backend["kolo"], by_backend["horovod"])],
                       "%.3f")))
print("\n## gradient sets through kolo-bench --model (out of place), 2 ranks: median step ms "
      "per run, and over the memory floor "
      "(every tensor copied once on every rank at once, the same run)")
for model in ("resnet50", "bert-base"):
    for op, label in (("sum", "Sum"), ("avg", "Average")):
        steps, floors = [], []
        for r in range(1, runs + 1):
            by_path = {row.get("path"): row["time_us"] / 1e3
                       for row in rows("%s/%s-%s-%d.json" % (out, model, op, r))
                       if row.get("record") == "row"}
            steps.append(by_path["kolo"])
            floors.append(by_path["kolo"] / by_path["memcpy"])
        print("%s, %s: min / median / max %s ms; over memcpy %s" % (
            model, label, mmm(steps, "%.1f"), mmm(floors)))
PY
