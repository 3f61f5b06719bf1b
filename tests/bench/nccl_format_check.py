#!/usr/bin/python3
"""kolo-bench's output read the way scripts written for nccl-tests read it.

Runs kolo-bench under the launcher at --np ranks for each --collective over a small sweep, parses
stdout with the data-row and "Avg bus bandwidth" regexes that nccl-tests users' scripts use, and
checks every row independently of kolo-bench's own arithmetic:
  - count == size / sizeof(type) (/ ranks for allgather, reducescatter, alltoall: nccl-tests'
    convention, the printed size being the whole buffer), sizes follow -b/-e/-f;
  - algbw == size / time * 1e-3 (GB/s, size in B, time in us) within the printed rounding;
  - busbw == algbw * nccl-tests' factor for the collective and rank count, within rounding;
  - #wrong == 0 in every measured group; N/A only where kolo has no in-place form;
  - "# Avg bus bandwidth" == the mean of kolo's busbw columns (out of place and in place);
  - --json FILE: JSON Lines, one "row" object per printed row.
With --cli it checks the command line instead (no launcher): -n 0, -b > -e, an unknown flag and
-g 2 each give exit status 2 and exactly one line on stderr; --version prints the version.
Exit status 0 when everything holds; the first failure is printed.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

# The data row of nccl-tests' all_reduce_perf & co.: size count type redop root, then time algbw
# busbw #wrong out of place and again in place. kolo-bench's path name follows at the end.
ROW = re.compile(
    r"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)"
    r"\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+(\S+)"
    r"\s+([0-9.]+|N/A)\s+([0-9.]+|N/A)\s+([0-9.]+|N/A)\s+(\S+)(?:\s+(\S+))?\s*$")
AVG = re.compile(r"^# Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
OOB = re.compile(r"^# Out of bounds values\s*:\s*(\d+)\s+(OK|FAILED)")

TYPE_SIZE = {"float": 4, "double": 8, "half": 2, "bfloat16": 2, "int32": 4, "int8": 1}
PER_RANK = {"allgather", "reducescatter", "alltoall"}
NO_KOLO_IN_PLACE = {"allgather", "reducescatter", "alltoall"}


def factor(collective, n):
    if collective == "allreduce":
        return 2.0 * (n - 1) / n
    if collective == "broadcast":
        return 1.0
    return (n - 1) / n


def half_unit(text):
    """Half of the last printed digit's unit: the rounding of a printed number."""
    decimals = len(text.split(".")[1]) if "." in text else 0
    return 0.5 * 10.0 ** -decimals


class Failure(Exception):
    pass


def expect(cond, message):
    if not cond:
        raise Failure(message)


def sweep_sizes(b, e, f):
    sizes, s = [], b
    while s <= e:
        sizes.append(s)
        s *= f
    return sizes


def check_run(args, collective, dtype="float"):
    b, e, f = 24, 24 * 4 ** 4, 4
    n = args.np
    with tempfile.TemporaryDirectory() as tmp:
        jpath = os.path.join(tmp, "rows.jsonl")
        cmd = args.launcher + [args.bench, "--collective", collective, "-d", dtype, "-b", str(b),
                               "-e", str(e), "-f", str(f), "-n", "3", "-w", "1", "-R", "2",
                               "-c", "1", "--json", jpath]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=args.timeout)
        where = "%s at %d ranks" % (collective, n)
        expect(p.returncode == 0, "%s: exit status %d\n%s\n%s" % (where, p.returncode, p.stdout,
                                                                   p.stderr))
        rows = []
        avg = []
        oob = []
        for line in p.stdout.splitlines():
            if line.startswith("#"):
                m = AVG.match(line)
                if m:
                    avg.append(float(m.group(1)))
                m = OOB.match(line)
                if m:
                    oob.append((int(m.group(1)), m.group(2)))
                continue
            m = ROW.match(line)
            expect(m is not None, "%s: a line that is no nccl-tests row: %r" % (where, line))
            rows.append((line, m))
        ts = TYPE_SIZE[dtype]
        per = n if collective in PER_RANK else 1
        expected_sizes = [s // (ts * per) * ts * per for s in sweep_sizes(b, e, f)]
        paths = ["mpi", "kolo"]
        expect(len(rows) == len(expected_sizes) * len(paths),
               "%s: %d rows, expected %d sizes x %d paths" % (where, len(rows),
                                                               len(expected_sizes), len(paths)))
        kolo_busbw = []
        for i, (line, m) in enumerate(rows):
            size, count = int(m.group(1)), int(m.group(2))
            path = m.group(14)
            expect(path == paths[i % 2], "%s: row %r: path %r, expected %r" % (
                where, line, path, paths[i % 2]))
            expect(size == expected_sizes[i // 2], "%s: row %r: size %d, expected %d (-b %d -e %d "
                   "-f %d)" % (where, line, size, expected_sizes[i // 2], b, e, f))
            expect(count == size // ts // per, "%s: row %r: count %d != size / %d / %d" % (
                where, line, count, ts, per))
            expect(m.group(3) == dtype, "%s: row %r: type" % (where, line))
            reduces = collective in ("allreduce", "reducescatter")
            expect(m.group(4) == ("sum" if reduces else "none"), "%s: row %r: redop" % (where, line))
            expect(int(m.group(5)) == (0 if collective == "broadcast" else -1),
                   "%s: row %r: root" % (where, line))
            for first, name in ((6, "out-of-place"), (10, "in-place")):
                t_text, a_text, bb_text, wrong = (m.group(first), m.group(first + 1),
                                                  m.group(first + 2), m.group(first + 3))
                if t_text == "N/A":
                    expect(path == "kolo" and collective in NO_KOLO_IN_PLACE
                           and a_text == bb_text == wrong == "N/A",
                           "%s: row %r: %s N/A where a measurement belongs" % (where, line, name))
                    continue
                t, algbw, busbw = float(t_text), float(a_text), float(bb_text)
                expect(wrong == "0", "%s: row %r: %s #wrong %s" % (where, line, name, wrong))
                h = half_unit(t_text)
                lo, hi = size / (t + h) * 1e-3, size / max(t - h, 1e-9) * 1e-3
                expect(lo - 0.005 - 1e-9 <= algbw <= hi + 0.005 + 1e-9,
                       "%s: row %r: %s algbw %s, size/time gives %.4f..%.4f" % (
                           where, line, name, a_text, lo, hi))
                fac = factor(collective, n)
                expect(abs(busbw - algbw * fac) <= 0.005 + 0.005 * fac + 1e-9,
                       "%s: row %r: %s busbw %s != algbw %s x %.4f" % (where, line, name, bb_text,
                                                                       a_text, fac))
                if path == "kolo":
                    kolo_busbw.append(busbw)
        expect(len(avg) == 1, "%s: %d '# Avg bus bandwidth' lines, expected 1" % (where, len(avg)))
        mean = sum(kolo_busbw) / len(kolo_busbw)
        expect(abs(avg[0] - mean) <= 0.005 + 1e-5 * abs(mean) + 1e-9,
               "%s: Avg bus bandwidth %g, mean of kolo's busbw columns %.4f" % (where, avg[0], mean))
        expect(oob == [(0, "OK")], "%s: out-of-bounds lines %r" % (where, oob))
        with open(jpath) as fh:
            records = [json.loads(line) for line in fh if line.strip()]
        expect(all(isinstance(r, dict) for r in records), "%s: --json: not all objects" % where)
        expect(records and records[0].get("record") == "run", "%s: --json: no run record" % where)
        json_rows = [r for r in records if r.get("record") == "row"]
        expect(len(json_rows) == len(rows), "%s: --json: %d rows, stdout %d" % (
            where, len(json_rows), len(rows)))
        for r, (line, m) in zip(json_rows, rows):
            expect(r["bytes"] == int(m.group(1)) and r["path"] == m.group(14)
                   and r["collective"] == collective,
                   "%s: --json row %r does not match %r" % (where, r, line))
    print("ok: %s, %d ranks: %d rows, Avg bus bandwidth %g" % (collective, n, len(rows), avg[0]))


def check_cli(args):
    def run(extra):
        return subprocess.run([args.bench] + extra, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    for extra in (["-n", "0"], ["-n", "-3"], ["-w", "-1"], ["-b", "1M", "-e", "1K"],
                  ["-f", "1", "-b", "8", "-e", "64"], ["--no-such-flag"], ["-g", "2"],
                  ["-t", "4"], ["-m", "2"], ["-a", "7"], ["--collective", "gather"],
                  ["--calibrate", "--json", "x.jsonl"]):
        p = run(extra)
        lines = p.stderr.splitlines()
        expect(p.returncode == 2 and len(lines) == 1 and lines[0].startswith("kolo-bench: ")
               and p.stdout == "",
               "%r: exit %d, stderr %r, stdout %r (expected exit 2 and one line)" % (
                   extra, p.returncode, p.stderr, p.stdout))
        print("ok: %s -> %s" % (" ".join(extra), lines[0]))
    # -c 0: nccl-tests' N/A in both #wrong columns, and still its "0 OK" line.
    p = run(["--paths", "mpi", "-c", "0", "-b", "64", "-e", "64", "-n", "1", "-w", "0", "-R", "1"])
    rows = [ROW.match(l) for l in p.stdout.splitlines() if not l.startswith("#")]
    expect(p.returncode == 0 and len(rows) == 1 and rows[0] is not None
           and rows[0].group(9) == rows[0].group(13) == "N/A"
           and "# Out of bounds values : 0 OK" in p.stdout,
           "-c 0: exit %d, stdout %r, stderr %r" % (p.returncode, p.stdout, p.stderr))
    print("ok: -c 0 -> #wrong N/A")
    p = run(["--version"])
    expect(p.returncode == 0 and re.match(r"^kolo-bench \d+\.\d+\.\d+\n$", p.stdout),
           "--version: exit %d, stdout %r" % (p.returncode, p.stdout))
    print("ok: --version -> %s" % p.stdout.strip())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", required=True)
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--collective", action="append", default=[])
    parser.add_argument("--cli", action="store_true")
    parser.add_argument("--timeout", type=int, default=120)
    parser.add_argument("launcher", nargs=argparse.REMAINDER,
                        help="-- mpirun -np N [flags]: the command before kolo-bench")
    args = parser.parse_args()
    args.launcher = [a for a in args.launcher if a != "--"] if args.launcher else []
    try:
        if args.cli:
            check_cli(args)
        for c in args.collective or ([] if args.cli else ["allreduce"]):
            check_run(args, c)
    except (Failure, subprocess.TimeoutExpired) as e:
        print("FAILED: %s" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
