#!/usr/bin/env bash
# The all-reduce algorithms across nodes with shaped links (scripts/netns_cluster.sh), measured
# against kolo's cost model, for docs/benchmarks.md. For each layout, 2 nodes x 2 ranks and
# 4 x 1, in clusters of its own:
#   1. `kolo-bench --calibrate`: the cost model's parameters measured on these nodes (inter-node
#      alpha and beta from a ping-pong over the shaped link), and every algorithm timed on the
#      layout (the selector follows those times there), written to a tuning file;
#   2. `kolo-bench -a all` with that tuning file (KOLO_TUNING_FILE): every algorithm's time per
#      size beside the model's prediction, and the selector's pick, every output checked;
#   3. bench/cross_node_bytes.py with the flat ring (ranks placed by node, and round-robin) and
#      the hierarchical all-reduce forced: bytes each node sent per call, from its interface's
#      counter, beside the prediction.
# Then one table per layout: per size, MPI_Allreduce, ring and hierarchical with the model's
# prediction over the measurement, the best of kolo's algorithms, and the selector's pick with
# its time over the best; and the model's error per algorithm from 1 MiB.
#
# Usage: scripts/bench_multinode.sh [--rate RATE] [--delay DELAY] [-b MIN] [-e MAX] [-R N]
#        (defaults 1gbit, 20us, 64K, 16M, 5). Output under build/bench-multinode/.
# The rate: on a 2-core machine the cores, not 10 Gbit/s links, bound 4 ranks' TCP traffic
# (a lone pair of nodes ping-pongs at 2.4 GB/s, four flows at once get a quarter of it each), so
# a model of independent links fits only where the links are slower than the cores: 1 Gbit/s.
set -euo pipefail

# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "${KOLO_ROOT}"

rate=1gbit delay=20us min=64K max=16M repeats=5
while (($#)); do
  case "$1" in
    --rate) rate=$2; shift 2 ;;
    --delay) delay=$2; shift 2 ;;
    -b) min=$2; shift 2 ;;
    -e) max=$2; shift 2 ;;
    -R) repeats=$2; shift 2 ;;
    *) echo "bench_multinode: unknown argument $1" >&2; exit 2 ;;
  esac
done
cluster=(scripts/netns_cluster.sh run --rate "${rate}" --delay "${delay}")
out="${KOLO_BUILD_DIR}/bench-multinode"
bench="${KOLO_BUILD_DIR}/bench/kolo-bench"
mkdir -p "${out}"
export PYTHONPATH="${KOLO_BUILD_DIR}/python${PYTHONPATH:+:${PYTHONPATH}}"

for layout in 2x2 4x1; do
  nodes=${layout%x*} per_node=${layout#*x}
  tuning="${out}/tuning-${layout}.json"
  rows="${out}/rows-${layout}.jsonl"
  bytes="${out}/bytes-${layout}.txt"
  rm -f "${tuning}" "${rows}"
  kolo_log "${layout}: calibrating"
  "${cluster[@]}" "${nodes}" "${per_node}" -- "${bench}" --calibrate --output "${tuning}" \
    >"${out}/calibrate-${layout}.txt" 2>&1
  kolo_log "${layout}: kolo-bench -a all -b ${min} -e ${max} -R ${repeats}"
  "${cluster[@]}" "${nodes}" "${per_node}" -- env KOLO_TUNING_FILE="${tuning}" \
    "${bench}" -a all -b "${min}" -e "${max}" -f 4 -R "${repeats}" --json "${rows}" \
    >"${out}/sweep-${layout}.txt" 2>&1
  : >"${bytes}"
  # The flat ring over ranks placed by node (one ring edge leaves each node), the same ring over
  # ranks placed round-robin (every edge leaves its node), and the hierarchical all-reduce.
  for job in ring ring-round-robin hierarchical; do
    ((per_node == 1)) && [[ ${job} != ring ]] && continue  # one rank a node: all the same
    placement=()
    [[ ${job} == ring-round-robin ]] && placement=(--mpirun-arg --map-by --mpirun-arg node)
    "${cluster[@]}" "${placement[@]}" "${nodes}" "${per_node}" -- \
      env KOLO_ALLREDUCE_ALGO="${job%-round-robin}" \
      /usr/bin/python3 bench/cross_node_bytes.py --sizes 1M,4M,16M --calls 10 >>"${bytes}" 2>&1
  done
  /usr/bin/python3 - "${rows}" "${layout}" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = [r for r in rows if r.get("record") == "row" and r.get("supported")]
baselines = {"MPI_Allreduce", "memcpy"}
sizes = sorted({r["bytes"] for r in rows})
def label(s):
    return "%d KiB" % (s >> 10) if s < 1 << 20 else "%d MiB" % (s >> 20)
print("\n## %s: time (us) measured, and the model's prediction over it" % sys.argv[2])
print("| size | MPI_Allreduce | ring | model/meas. | hierarchical | model/meas. "
      "| best of kolo's | selector's pick (time / best) |")
print("|---:|---:|---:|---:|---:|---:|---|---|")
for s in sizes:
    at = {r["algorithm"]: r for r in rows if r["bytes"] == s}
    kolo = {a: r for a, r in at.items() if a not in baselines}
    best = min(kolo.values(), key=lambda r: r["time_us"])
    pick = next((r for r in kolo.values() if r.get("selected")), None)
    def cell(a):
        r = at.get(a)
        if not r:
            return "-", "-"
        m = r.get("model_us")
        return "%.0f" % r["time_us"], ("%.2f" % (m / r["time_us"]) if m else "-")
    ring, ring_m = cell("ring")
    hier, hier_m = cell("hierarchical")
    print("| %s | %.0f | %s | %s | %s | %s | %s %.0f | %s |" % (
        label(s), at["MPI_Allreduce"]["time_us"], ring, ring_m, hier, hier_m,
        best["algorithm"], best["time_us"],
        "%s %.2f" % (pick["algorithm"], pick["time_us"] / best["time_us"]) if pick else "-"))
print("\nmodel / measured per algorithm, sizes >= 1 MiB (min, median, max):")
for a in sorted({r["algorithm"] for r in rows} - baselines):
    q = [r["model_us"] / r["time_us"] for r in rows
         if r["algorithm"] == a and r["bytes"] >= 1 << 20 and r.get("model_us")]
    if q:
        print("  %-14s %.2f %.2f %.2f" % (a, min(q), statistics.median(q), max(q)))
PY
  cat "${bytes}"
done
kolo_log "outputs in ${out}"
