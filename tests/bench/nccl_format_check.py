#!/usr/bin/python3
"""kolo-bench's output read the way scripts written for nccl-tests read it.

Runs kolo-bench under the launcher at --np ranks for each --collective over a sweep whose sizes
need rounding (-b 102 -e 1M -f 7: none is a multiple of 4 bytes), the dtype and (for broadcast)
a non-zero root varying with the collective and rank count. Parses
stdout with the strict data-row regex of nccl-tests users' scripts (a number in every time, algbw
and busbw column, N/A only in #wrong) and checks every row independently of kolo-bench's own
arithmetic:
  - size and count follow nccl-tests (v2.13.12 on): count = size / sizeof(type) for allreduce and
    broadcast; for allgather, reducescatter and alltoall count = (size / sizeof(type) / ranks)
    rounded down to a multiple of 16 bytes, the printed size being the whole buffer; rows of
    count 0 are printed too;
  - the printed algbw and busbw agree with size / time and nccl-tests' factor within rounding;
  - from --json (full precision): algbw == bytes / time_us / 1e3 and busbw == algbw * factor to
    1e-9 relative in both halves, the factor computed here from nccl-tests' formulas; the
    "# Avg bus bandwidth" line == the mean of kolo's busbw (both halves) to its printed digits;
  - #wrong == 0 in every half; "# Out of bounds values : 0 OK" and "# Avg bus bandwidth" once
    each, on consecutive lines;
  - no progress line on stderr (it is no terminal).
That #wrong can be non-zero at all is tests/unit/bench_collective_index_test.cc's part.
With --cli it checks the command line instead (no launcher): usage errors each give exit status 2
and exactly one line on stderr; --version; -c 0; -b 0 -e 0 (rows of size 0 and both closing
lines); --json /dev/full (exit status 1).
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
# busbw #wrong out of place and again in place; numbers everywhere but #wrong, which is N/A
# without a check. kolo-bench's path name may follow as trailing text.
ROW = re.compile(
    r"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)"
    r"\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+(\d+|N/A)"
    r"\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+(\d+|N/A)(?:\s+(\S.*?))?\s*$")
AVG = re.compile(r"^# Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
OOB = re.compile(r"^# Out of bounds values\s*:\s*(\d+)\s+(OK|FAILED)")

TYPE_SIZE = {"float": 4, "double": 8, "half": 2, "bfloat16": 2, "int32": 4, "int8": 1}
PER_RANK = {"allgather", "reducescatter", "alltoall"}
COLLECTIVES = ["allreduce", "allgather", "broadcast", "reducescatter", "alltoall"]
DTYPES = ["float", "double", "int32"]


def factor(collective, n):
    """nccl-tests' GetBw: busbw = algbw * factor."""
    if collective == "allreduce":
        return 2.0 * (n - 1) / n
    if collective == "broadcast":
        return 1.0
    return (n - 1) / n


def layout(collective, size, ts, n):
    """(printed size, printed count) for one -b/-e/-f size: nccl-tests' GetCollByteCount."""
    count = size // ts
    if collective not in PER_RANK:
        return count * ts, count
    per_rank = (count // n) & ~(16 // ts - 1)
    return per_rank * n * ts, per_rank


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


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b)) + 1e-300


def check_run(args, collective):
    b, e, f = 102, 1 << 20, 7
    n = args.np
    dtype = DTYPES[(COLLECTIVES.index(collective) + n) % len(DTYPES)]
    root = n - 1 if collective == "broadcast" else -1
    with tempfile.TemporaryDirectory() as tmp:
        jpath = os.path.join(tmp, "rows.jsonl")
        cmd = args.launcher + [args.bench, "--collective", collective, "-d", dtype, "-b", str(b),
                               "-e", str(e), "-f", str(f), "-n", "3", "-w", "1", "-R", "2",
                               "-c", "1", "--json", jpath]
        if root >= 0:
            cmd += ["-r", str(root)]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=args.timeout)
        where = "%s %s at %d ranks" % (collective, dtype, n)
        expect(p.returncode == 0, "%s: exit status %d\n%s\n%s" % (where, p.returncode, p.stdout,
                                                                   p.stderr))
        expect("sizes," not in p.stderr, "%s: a progress line on a stderr that is no terminal: %r"
               % (where, p.stderr))
        rows = []
        avg = []
        oob = []
        lines = p.stdout.splitlines()
        for i, line in enumerate(lines):
            if line.startswith("#"):
                m = AVG.match(line)
                if m:
                    avg.append(float(m.group(1)))
                    expect(i > 0 and OOB.match(lines[i - 1]), "%s: the Avg line does not follow "
                           "the Out of bounds line" % where)
                m = OOB.match(line)
                if m:
                    oob.append((int(m.group(1)), m.group(2)))
                continue
            m = ROW.match(line)
            expect(m is not None, "%s: a line that is no nccl-tests row: %r" % (where, line))
            rows.append((line, m))
        ts = TYPE_SIZE[dtype]
        sizes = []
        s = b
        while s <= e:
            sizes.append(s)
            s *= f
        expected = [layout(collective, s, ts, n) for s in sizes]
        expect(any(size != s for (size, _), s in zip(expected, sizes)),
               "%s: no size of the sweep needs rounding" % where)
        paths = ["mpi", "kolo"]
        expect(len(rows) == len(expected) * len(paths),
               "%s: %d rows, expected %d sizes x %d paths" % (where, len(rows), len(expected),
                                                               len(paths)))
        fac = factor(collective, n)
        for i, (line, m) in enumerate(rows):
            size, count = int(m.group(1)), int(m.group(2))
            path = m.group(14)
            expect(path == paths[i % 2], "%s: row %r: path %r, expected %r" % (
                where, line, path, paths[i % 2]))
            expect((size, count) == expected[i // 2], "%s: row %r: size, count %d %d, expected "
                   "%r (-b %d -e %d -f %d)" % (where, line, size, count, expected[i // 2], b, e, f))
            expect(m.group(3) == dtype, "%s: row %r: type" % (where, line))
            reduces = collective in ("allreduce", "reducescatter")
            expect(m.group(4) == ("sum" if reduces else "none"),
                   "%s: row %r: redop" % (where, line))
            expect(int(m.group(5)) == root, "%s: row %r: root, expected %d" % (where, line, root))
            for first, name in ((6, "out-of-place"), (10, "in-place")):
                t_text, a_text, bb_text, wrong = (m.group(first), m.group(first + 1),
                                                  m.group(first + 2), m.group(first + 3))
                t, algbw, busbw = float(t_text), float(a_text), float(bb_text)
                expect(wrong == "0", "%s: row %r: %s #wrong %s" % (where, line, name, wrong))
                h = half_unit(t_text)
                lo, hi = size / (t + h) * 1e-3, size / max(t - h, 1e-9) * 1e-3
                expect(lo - 0.005 - 1e-9 <= algbw <= hi + 0.005 + 1e-9,
                       "%s: row %r: %s algbw %s, size/time gives %.4f..%.4f" % (
                           where, line, name, a_text, lo, hi))
                expect(abs(busbw - algbw * fac) <= 0.005 + 0.005 * fac + 1e-9,
                       "%s: row %r: %s busbw %s != algbw %s x %.4f" % (where, line, name, bb_text,
                                                                       a_text, fac))
        expect(len(avg) == 1, "%s: %d '# Avg bus bandwidth' lines, expected 1" % (where, len(avg)))
        expect(oob == [(0, "OK")], "%s: out-of-bounds lines %r" % (where, oob))
        with open(jpath) as fh:
            records = [json.loads(line) for line in fh if line.strip()]
        expect(all(isinstance(r, dict) for r in records), "%s: --json: not all objects" % where)
        expect(records and records[0].get("record") == "run", "%s: --json: no run record" % where)
        json_rows = [r for r in records if r.get("record") == "row"]
        expect(len(json_rows) == len(rows), "%s: --json: %d rows, stdout %d" % (
            where, len(json_rows), len(rows)))
        kolo_busbw = []
        for r, (line, m) in zip(json_rows, rows):
            expect(r["bytes"] == int(m.group(1)) and r["count"] == int(m.group(2))
                   and r["path"] == m.group(14) and r["collective"] == collective
                   and r["root"] == root and r["dtype"] == dtype,
                   "%s: --json row %r does not match %r" % (where, r, line))
            for prefix in ("", "inplace_"):
                t, algbw, busbw = r[prefix + "time_us"], r[prefix + "algbw"], r[prefix + "busbw"]
                expect(t > 0, "%s: --json row %r: %stime_us %r" % (where, r, prefix, t))
                expect(close(algbw, r["bytes"] / t / 1e3),
                       "%s: --json row %r: %salgbw %r != bytes / time_us / 1e3 = %r" % (
                           where, r, prefix, algbw, r["bytes"] / t / 1e3))
                expect(close(busbw, algbw * fac),
                       "%s: --json row %r: %sbusbw %r != algbw x %r" % (where, r, prefix, busbw,
                                                                        fac))
                expect(r[prefix + "wrong"] == 0, "%s: --json row %r: %swrong" % (where, r, prefix))
                if r["path"] == "kolo":
                    kolo_busbw.append(busbw)
        expect(any(v > 0 for v in kolo_busbw), "%s: kolo's busbw is 0 at every size" % where)
        mean = sum(kolo_busbw) / len(kolo_busbw)
        expect(close(avg[0], mean, 1e-5),
               "%s: Avg bus bandwidth %g, mean of kolo's busbw (--json) %.9g" % (where, avg[0],
                                                                                 mean))
        summary = [r for r in records if r.get("record") == "summary"]
        expect(len(summary) == 1 and summary[0]["out_of_bounds"] == 0
               and close(summary[0]["avg_busbw"]["kolo"], mean),
               "%s: --json summary %r" % (where, summary))
    print("ok: %s: %d rows, Avg bus bandwidth %g" % (where, len(rows), avg[0]))


def check_cli(args):
    def run(extra):
        return subprocess.run([args.bench] + extra, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    for extra in (["-n", "0"], ["-n", "-3"], ["-w", "-1"], ["-b", "1M", "-e", "1K"],
                  ["-f", "1", "-b", "8", "-e", "64"], ["--no-such-flag"], ["-g", "2"],
                  ["-t", "4"], ["-m", "2"], ["-a", "7"], ["--collective", "gather"],
                  ["--calibrate", "--json", "x.jsonl"], ["-b", "0", "-e", "64"],
                  ["--transport", "tcp"], ["--transport", "ucx"]):
        p = run(extra)
        lines = p.stderr.splitlines()
        expect(p.returncode == 2 and len(lines) == 1 and lines[0].startswith("kolo-bench: ")
               and p.stdout == "",
               "%r: exit %d, stderr %r, stdout %r (expected exit 2 and one line)" % (
                   extra, p.returncode, p.stderr, p.stdout))
        print("ok: %s -> %s" % (" ".join(extra), lines[0]))
    def closing(stdout):
        """The lines from nccl-tests' first closing line on."""
        lines = stdout.splitlines()
        starts = [i for i, l in enumerate(lines) if OOB.match(l)]
        return lines[starts[0]:] if len(starts) == 1 else []

    # -c 0: nccl-tests' N/A in both #wrong columns, still its "0 OK" line, then the Avg line, and
    # kolo-bench's "not checked" after both.
    p = run(["--paths", "mpi", "-c", "0", "-b", "64", "-e", "64", "-n", "1", "-w", "0", "-R", "1"])
    rows = [ROW.match(l) for l in p.stdout.splitlines() if not l.startswith("#")]
    tail = closing(p.stdout)
    expect(p.returncode == 0 and len(rows) == 1 and rows[0] is not None
           and rows[0].group(9) == rows[0].group(13) == "N/A"
           and len(tail) >= 3 and tail[0] == "# Out of bounds values : 0 OK"
           and AVG.match(tail[1]) and "# (outputs not checked: -c 0)" in tail[2:],
           "-c 0: exit %d, stdout %r, stderr %r" % (p.returncode, p.stdout, p.stderr))
    print("ok: -c 0 -> #wrong N/A, closing lines %r" % tail)
    # -b 0 -e 0: rows of size 0 (count 0), checked, and both closing lines.
    p = run(["-b", "0", "-e", "0", "-n", "1", "-w", "0", "-R", "1"])
    rows = [ROW.match(l) for l in p.stdout.splitlines() if not l.startswith("#")]
    tail = closing(p.stdout)
    expect(p.returncode == 0 and len(rows) == 2 and all(r and r.group(1) == "0" for r in rows)
           and len(tail) >= 2 and tail[0] == "# Out of bounds values : 0 OK"
           and tail[1] == "# Avg bus bandwidth    : 0 " and "not checked" not in p.stdout,
           "-b 0 -e 0: exit %d, stdout %r, stderr %r" % (p.returncode, p.stdout, p.stderr))
    print("ok: -b 0 -e 0 -> %d rows of size 0, closing lines %r" % (len(rows), tail[:2]))
    # Less than 16 bytes per rank: nccl-tests' row of count 0, printed and timed.
    p = run(["--collective", "alltoall", "-b", "8", "-e", "8", "-n", "1", "-w", "0", "-R", "1"])
    rows = [ROW.match(l) for l in p.stdout.splitlines() if not l.startswith("#")]
    expect(p.returncode == 0 and len(rows) == 2
           and all(r and r.group(1) == r.group(2) == "0" and r.group(9) == "0" for r in rows),
           "alltoall -b 8 -e 8: exit %d, stdout %r, stderr %r" % (p.returncode, p.stdout, p.stderr))
    print("ok: alltoall -b 8 -e 8 -> rows of count 0")
    # A --json file that cannot be written: the error on stderr and exit status 1.
    if os.path.exists("/dev/full"):
        p = run(["--json", "/dev/full", "-b", "64", "-e", "64", "-n", "1", "-w", "0", "-R", "1"])
        expect(p.returncode == 1 and "--json" in p.stderr,
               "--json /dev/full: exit %d, stderr %r" % (p.returncode, p.stderr))
        print("ok: --json /dev/full -> exit 1")
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
