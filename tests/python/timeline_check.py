"""Checks a kolo timeline (runtime/timeline.h): the file is valid JSON, a Chrome trace event
array; times never go back; on every tensor's row each end closes a begun span; and, on request,
every span is closed and every phase of a fused all-reduce is there with every rank's ready mark,
and every negotiation, cached steps included, has one ready mark of each rank.

Used by tests/python/test_timeline.py and the ctest scripts in tests/mpi/; it also works on any
timeline of a real job:

    python3 tests/python/timeline_check.py timeline.json [--ranks N] [--phases] [--complete]
                                                         [--cycles] [--every-step]
                                                         [--min-events N]

Exits 0 and prints a summary, or exits 1 naming what is wrong.
"""
import argparse
import collections
import json
import re
import sys

COLLECTIVE = re.compile(r"^ALLREDUCE \((.+)\)$")  # the collective, named by its algorithm
PHASES = ("NEGOTIATE_ALLREDUCE", "QUEUE", "ALLREDUCE", "MEMCPY_IN_FUSION_BUFFER",
          "ALLREDUCE (<algorithm>)", "MEMCPY_OUT_FUSION_BUFFER")
COPIES = ("MEMCPY_IN_FUSION_BUFFER", "MEMCPY_OUT_FUSION_BUFFER")
# Algorithms that reduce a fused group in its tensors' own buffers (RunsLists in
# collectives/algorithm.h): a group they reduce has no fusion-buffer copies, except one of
# float16/bfloat16, which is widened in the buffer whatever the algorithm.
LIST_ALGORITHMS = ("shm",)


class TimelineError(AssertionError):
    pass


def load(path):
    """The events of the timeline at `path`; TimelineError when it is not a JSON array."""
    with open(path, "rb") as f:
        text = f.read()
    try:
        events = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        tail = text[-300:].decode("utf-8", "replace")
        raise TimelineError("%s is not valid JSON (%s); it ends with:\n%s" % (path, e, tail))
    if not isinstance(events, list):
        raise TimelineError("%s is JSON but not an array of trace events" % path)
    return events


def check(events, ranks=None, phases=False, complete=False, cycles=False, every_step=False,
          min_events=0):
    """Checks the events; returns a summary dict, raises TimelineError listing the problems.

    ranks: every rank 0..ranks-1 must have a ready mark somewhere.
    phases: every phase of PHASES must appear, and each fused all-reduce must have its copies
      (the copies only where some all-reduce needs them: a fused one through an algorithm that
      does not take lists, or any that has them).
    complete: no span may be left open (a stopped or shut-down timeline; not a killed one).
    cycles: CYCLE_START marks must be there.
    every_step: each negotiation that ended without an error must hold exactly one ready mark
      of each rank 0..ranks-1 (with ranks; for a job where every rank submits every tensor and
      no rank joins, recorded from before the first submission).
    """
    problems = []
    names = {}                                   # pid -> tensor name
    rows = collections.defaultdict(list)         # pid -> events in file order
    marks = collections.Counter()                # cycle marks and similar global instants
    last_ts = float("-inf")
    for e in events:
        if not isinstance(e, dict) or "ph" not in e:
            problems.append("not a trace event: %r" % (e,))
            continue
        if e["ph"] == "M":
            if e.get("name") == "process_name":
                names[e["pid"]] = e["args"]["name"]
            continue
        ts = e.get("ts")
        if not isinstance(ts, (int, float)):
            problems.append("event without a numeric ts: %r" % (e,))
            continue
        if ts < last_ts:
            problems.append("time goes back from %s to %s at %r" % (last_ts, ts, e))
        last_ts = ts
        if e["ph"] == "i":
            marks[e.get("name")] += 1
            continue
        rows[e.get("pid")].append(e)

    spans = collections.Counter()       # span name -> count, over every row
    ready = set()                       # ranks with a ready mark
    fused_without_copies = []
    copies_expected = False             # some row needs or has fusion-buffer copies
    allreduce_without = collections.defaultdict(list)
    for pid, row in rows.items():
        name = names.get(pid)
        if name is None:
            problems.append("pid %s has events but no process_name" % pid)
        stack, row_spans, fused, half = [], collections.Counter(), False, False
        step_marks = collections.Counter()  # rank -> marks in the open negotiation
        for e in row:
            if e["ph"] == "B":
                if not stack and e["name"].startswith("NEGOTIATE_"):
                    step_marks.clear()
                stack.append(e["name"])
                row_spans[e["name"]] += 1
                if e["name"] == "ALLREDUCE" and e.get("args", {}).get("fused_tensors", 1) > 1:
                    fused = True
            elif e["ph"] == "E":
                # A tensor's last end carries its dtype (runtime/timeline.cc, TensorFinished).
                half = half or e.get("args", {}).get("dtype") in ("float16", "bfloat16")
                if not stack:
                    problems.append("%r: an end without a begin at ts %s" % (name, e["ts"]))
                else:
                    ended = stack.pop()
                    if (every_step and ranks is not None and not stack and
                            ended.startswith("NEGOTIATE_") and
                            "error" not in e.get("args", {}) and
                            step_marks != collections.Counter(range(ranks))):
                        problems.append("%r: the negotiation ending at ts %s has ready marks %s, "
                                        "expected one of each rank 0..%d" %
                                        (name, e["ts"], dict(sorted(step_marks.items())),
                                         ranks - 1))
            elif e["ph"] == "X":
                ready.add(int(e["name"]))
                step_marks[int(e["name"])] += 1
        if complete and stack:
            problems.append("%r: spans left open: %s" % (name, stack))
        spans.update(row_spans)
        if complete and row_spans["ALLREDUCE"]:
            for need in ("NEGOTIATE_ALLREDUCE", "QUEUE"):
                if not row_spans[need]:
                    allreduce_without[need].append(name)
            if not any(COLLECTIVE.match(s) for s in row_spans):
                allreduce_without["ALLREDUCE (<algorithm>)"].append(name)
            algorithms = {COLLECTIVE.match(s).group(1) for s in row_spans if COLLECTIVE.match(s)}
            needs_copies = fused and (half or any(a not in LIST_ALGORITHMS for a in algorithms))
            has_copies = all(row_spans[c] for c in COPIES)
            copies_expected = copies_expected or needs_copies or has_copies
            if needs_copies and not has_copies:
                fused_without_copies.append(name)

    collectives = sorted({s for s in spans if COLLECTIVE.match(s)})
    if phases:
        for phase in PHASES:
            if phase in COPIES and not copies_expected:
                continue
            present = collectives if phase == "ALLREDUCE (<algorithm>)" else spans[phase]
            if not present:
                problems.append("no %s span anywhere" % phase)
        if fused_without_copies:
            problems.append("fused all-reduces without MEMCPY spans: %s" % fused_without_copies[:5])
        for need, tensors in sorted(allreduce_without.items()):
            problems.append("%d all-reduced tensors without %s, e.g. %s" %
                            (len(tensors), need, tensors[:3]))
    if ranks is not None:
        missing = sorted(set(range(ranks)) - ready)
        if missing:
            problems.append("no ready mark of rank(s) %s" % missing)
    if cycles and not marks["CYCLE_START"]:
        problems.append("no CYCLE_START marks")
    if len(events) < min_events:
        problems.append("only %d events, expected at least %d" % (len(events), min_events))
    if problems:
        raise TimelineError("\n".join(problems[:20]))
    return {"events": len(events), "tensors": len(names), "names": sorted(names.values()),
            "spans": dict(spans),
            "collectives": collectives, "ready_ranks": sorted(ready),
            "cycle_marks": marks["CYCLE_START"]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path")
    parser.add_argument("--ranks", type=int, help="expect a ready mark of each rank 0..N-1")
    parser.add_argument("--phases", action="store_true", help="expect every phase")
    parser.add_argument("--complete", action="store_true", help="expect every span closed")
    parser.add_argument("--cycles", action="store_true", help="expect CYCLE_START marks")
    parser.add_argument("--every-step", action="store_true",
                        help="expect one ready mark of each rank in every negotiation")
    parser.add_argument("--min-events", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        summary = check(load(args.path), ranks=args.ranks, phases=args.phases,
                        complete=args.complete, cycles=args.cycles,
                        every_step=args.every_step, min_events=args.min_events)
    except (OSError, TimelineError) as e:
        print("timeline_check: %s: %s" % (args.path, e), file=sys.stderr)
        return 1
    print("timeline_check: %s: valid; %d events, %d tensors, collectives %s, ready marks of "
          "ranks %s, %d cycle marks" % (args.path, summary["events"], summary["tensors"],
                                        summary["collectives"], summary["ready_ranks"],
                                        summary["cycle_marks"]))
    for name, count in sorted(summary["spans"].items()):
        print("  %-28s %d" % (name, count))
    return 0


if __name__ == "__main__":
    sys.exit(main())
