#!/usr/bin/python3
"""`kolo-bench --calibrate` end to end: the tuning file it writes, read back by the selector.

Runs the calibration under the launcher, then checks the file independently of kolo's loader:
every figure positive and finite, and the library all-reduce timed on this run's layout (--np
ranks on one node, 4 KiB to 16 MiB by 4x, strictly ascending). Then runs `kolo-bench -a mpi`
with KOLO_TUNING_FILE at sizes the calibration timed and at one between two of them: the
model column of MPI's own all-reduce must be the calibration's time at a timed size (to the
printed precision), and between two timed sizes must lie between their times (the estimate
follows the measurement on its layout). Exit status 0 when everything holds; the first failure
is printed.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile


def fail(message):
    print("FAILED: " + message)
    sys.exit(1)


def run(cmd, env=None):
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=env, timeout=240)
    if done.returncode != 0:
        fail("exit status %d: %s\n%s" % (done.returncode, " ".join(cmd), done.stdout[-3000:]))
    return done.stdout


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
        lib = tuning.get("library_allreduce")
        if not isinstance(lib, dict):
            fail("no library_allreduce in %s" % json.dumps(tuning))
        expected = {"ranks": args.np, "nodes": 1, "local_size": args.np}
        for key, want in expected.items():
            if lib.get(key) != want:
                fail("library_allreduce %s is %r, not %r" % (key, lib.get(key), want))
        sizes = [4096 * 4 ** k for k in range(7)]
        if lib["bytes"] != sizes:
            fail("library_allreduce bytes %r, not %r" % (lib["bytes"], sizes))
        micros = lib["micros"]
        if len(micros) != len(sizes) or not all(math.isfinite(t) and t > 0 for t in micros):
            fail("library_allreduce micros %r" % micros)
        timed = dict(zip(sizes, micros))

        rows_path = os.path.join(tmp, "rows.jsonl")
        env = dict(os.environ, KOLO_TUNING_FILE=path)
        run(args.launcher + [args.bench, "-a", "mpi", "-b", "64K", "-e", "1M", "-f", "2",
                             "-n", "2", "-w", "1", "-R", "1", "--json", rows_path], env)
        model = {}
        for line in open(rows_path):
            row = json.loads(line)
            if row.get("record") == "row" and row.get("algorithm") == "mpi":
                model[row["bytes"]] = row["model_us"]
        for size in (65536, 262144, 1048576):
            got = model.get(size)
            if got is None or abs(got - timed[size]) > 1e-6 * timed[size]:
                fail("model of mpi at %d B is %r, the calibration timed %r" %
                     (size, got, timed[size]))
        low, high = sorted((timed[262144], timed[1048576]))
        got = model.get(524288)
        if got is None or not low * (1 - 1e-9) <= got <= high * (1 + 1e-9):
            fail("model of mpi at 524288 B is %r, not between %r and %r" % (got, low, high))
    print("PASSED: the tuning file's library all-reduce (%d sizes) drives mpi's estimate"
          % len(sizes))


if __name__ == "__main__":
    main()
