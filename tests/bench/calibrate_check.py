#!/usr/bin/python3
"""`kolo-bench --calibrate` end to end: the tuning file it writes, read back by the selector.

Runs the calibration under the launcher, then checks the file independently of kolo's loader:
every figure positive and finite, and the algorithms timed on this run's layout (--np ranks on
one node, 4 KiB to 16 MiB by 4x), MPI's own ("mpi") and kolo's ring among them. Then runs
`kolo-bench -a all` with KOLO_TUNING_FILE from 64 KiB to 1 MiB by 2x and reads which algorithm
the selector picked at each size (the row marked selected):
  - at the sizes the calibration timed, the algorithm it timed fastest (the estimate of a timed
    algorithm on its layout is its time there);
  - with the file's times of one algorithm that was not picked divided by 1000, that algorithm,
    at every size, timed or between two timed ones.
Exit status 0 when everything holds; the first failure is printed.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

SIZES = [4096 * 4 ** k for k in range(7)]


def fail(message):
    print("FAILED: " + message)
    sys.exit(1)


def run(cmd, env=None):
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=env, timeout=240)
    if done.returncode != 0:
        fail("exit status %d: %s\n%s" % (done.returncode, " ".join(cmd), done.stdout[-3000:]))
    return done.stdout


def picks(args, tmp, tuning):
    """{bytes: the algorithm -a marked selected} with `tuning` as KOLO_TUNING_FILE."""
    rows_path = os.path.join(tmp, "rows.jsonl")
    if os.path.exists(rows_path):
        os.remove(rows_path)
    env = dict(os.environ, KOLO_TUNING_FILE=tuning)
    run(args.launcher + [args.bench, "-a", "all", "-b", "64K", "-e", "1M", "-f", "2", "-n", "2",
                         "-w", "1", "-R", "1", "--json", rows_path], env)
    out = {}
    for line in open(rows_path):
        row = json.loads(line)
        if row.get("record") == "row" and row.get("selected"):
            out[row["bytes"]] = row["algorithm"]
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", required=True)
    parser.add_argument("--np", type=int, required=True)
    parser.add_argument("launcher", nargs="+")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tuning.json")
        run(args.launcher + [args.bench, "--calibrate", "-R", "3", "--output", path])
        tuning = json.load(open(path))
        for key in ("gamma_us", "copy_us", "copy_mem_us", "cache_bytes", "sync_us"):
            value = tuning.get(key)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                fail("%s is %r" % (key, value))
        timed = tuning.get("measured_allreduce")
        if not isinstance(timed, dict):
            fail("no measured_allreduce in %s" % json.dumps(tuning))
        for key, want in {"backend": "mpi", "ranks": args.np, "nodes": 1,
                          "local_size": args.np}.items():
            if timed.get(key) != want:
                fail("measured_allreduce %s is %r, not %r" % (key, timed.get(key), want))
        if timed["bytes"] != SIZES:
            fail("measured_allreduce bytes %r, not %r" % (timed["bytes"], SIZES))
        micros = timed["micros"]
        for name in ("mpi", "ring"):
            if name not in micros:
                fail("%s was not timed: %s" % (name, sorted(micros)))
        for name, times in micros.items():
            if len(times) != len(SIZES) or not all(math.isfinite(t) and t > 0 for t in times):
                fail("times of %s: %r" % (name, times))

        picked = picks(args, tmp, path)
        for size in (65536, 262144, 1048576):
            i = SIZES.index(size)
            fastest = min(micros, key=lambda name: micros[name][i])
            if picked.get(size) != fastest:
                fail("at %d B the selector picked %r; the calibration timed %s fastest (%s)" % (
                    size, picked.get(size), fastest,
                    ", ".join("%s %.1f us" % (n, micros[n][i]) for n in sorted(micros))))

        favoured = next(name for name in sorted(micros) if name not in picked.values())
        micros[favoured] = [t / 1000 for t in micros[favoured]]
        with open(path, "w") as out:
            json.dump(tuning, out)
        picked = picks(args, tmp, path)
        for size in (65536, 131072, 262144, 524288, 1048576):
            if picked.get(size) != favoured:
                fail("at %d B the selector picked %r, not %s, whose times were divided by 1000"
                     % (size, picked.get(size), favoured))
    print("PASSED: %d algorithms timed; the selector follows their times" % len(micros))


if __name__ == "__main__":
    main()
