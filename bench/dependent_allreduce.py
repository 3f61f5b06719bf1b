#!/usr/bin/env python3
"""Dependent small all-reduces through kolo.torch: the latency a training loop sees when each
all-reduce needs the previous one's result.

    mpirun -np 2 /usr/bin/python3 bench/dependent_allreduce.py [--ops 200] [--runs 1] [--kib 1]

Each run times --ops calls of ``t = hvd.allreduce(t)`` on a float32 tensor of --kib KiB (each
call waits for the one before, so nothing overlaps and every call pays a whole cycle: submit,
negotiate, all-reduce, complete). Rank 0 prints one line per run: the run's total in ms, and the
slowest and median single call in us. Each run's result is checked against the value computed
from the ranks' known inputs (a wrong value fails the run).

--split times each call in its two halves, on every rank: the submission (``allreduce_async``:
Python, the binding and ``kolo_enqueue``, nothing that waits for a peer) and the wait for the
result (``synchronize``: negotiation, the all-reduce, the completion), and adds the background
thread's negotiation counters (``kolo._kolo.negotiation_stats()``) for the run; every rank
prints one more line per run with their medians and per-cycle means, and the time of a fixed
loop of Python run just before (100000 additions: the speed of the rank's core at the time,
without kolo). These calls skip what ``hvd.allreduce`` adds around the same two (its autograd
function), so a run with --split is a little faster than one without. Where the time of a slow run goes: docs/benchmarks.md, "Where a
slow process's dependent all-reduces spend their time".
"""
import argparse
import statistics
import sys
import time

import torch

import kolo.torch as hvd


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=200, help="dependent all-reduces per run")
    parser.add_argument("--runs", type=int, default=1, help="timed runs")
    parser.add_argument("--kib", type=int, default=1, help="tensor size in KiB")
    parser.add_argument("--warmup", type=int, default=20, help="untimed calls first")
    parser.add_argument("--split", action="store_true",
                        help="also time submission and wait apart, on every rank")
    args = parser.parse_args()
    hvd.init()
    if args.split:
        from kolo import _kolo  # kolo's own counters (with Horovod in place of kolo: no --split)
    n = args.kib * 256
    for _ in range(args.warmup):
        hvd.allreduce(torch.ones(n), name="dependent", op=hvd.Sum)
    size = hvd.size()
    for _ in range(args.runs):
        # After the first call every rank holds the mean of 1..size, and averaging keeps it
        # there: the result is known after any number of calls, where Sum would overflow
        # float32 after a few hundred calls at many ranks.
        t = torch.full((n,), float(hvd.rank() + 1))
        expected = sum(range(1, size + 1)) / size
        calls, submits, waits = [], [], []
        stats_before = _kolo.negotiation_stats() if args.split else None
        if args.split:
            # The speed of this rank's core right now, without kolo: a fixed loop of Python.
            loop_start = time.perf_counter()
            x = 0
            for i in range(100000):
                x += i
            cpu_loop_ms = (time.perf_counter() - loop_start) * 1e3
        start = time.perf_counter()
        for _ in range(args.ops):
            before = time.perf_counter()
            if args.split:
                handle = hvd.allreduce_async(t, name="dependent", op=hvd.Average)
                submitted = time.perf_counter()
                t = hvd.synchronize(handle)
                submits.append((submitted - before) * 1e6)
                waits.append((time.perf_counter() - submitted) * 1e6)
            else:
                t = hvd.allreduce(t, name="dependent", op=hvd.Average)
            calls.append((time.perf_counter() - before) * 1e6)
        total_ms = (time.perf_counter() - start) * 1e3
        if not torch.allclose(t, torch.full((n,), expected)):
            print("rank %d: wrong result %r, expected %r" % (hvd.rank(), t[0].item(), expected),
                  file=sys.stderr)
            sys.exit(1)
        if args.split:
            after = _kolo.negotiation_stats()
            cycles = max(1, after["cycles"] - stats_before["cycles"])
            print("dependent_allreduce: rank %d total_ms %.2f submit_median_us %.1f "
                  "wait_median_us %.1f cycles %d negotiate_us_per_cycle %.1f "
                  "exchange_us_per_cycle %.1f cpu_loop_ms %.2f" % (
                      hvd.rank(), total_ms, statistics.median(submits), statistics.median(waits),
                      after["cycles"] - stats_before["cycles"],
                      (after["negotiate_ns"] - stats_before["negotiate_ns"]) / 1e3 / cycles,
                      (after["exchange_ns"] - stats_before["exchange_ns"]) / 1e3 / cycles,
                      cpu_loop_ms),
                  flush=True)
        if hvd.rank() == 0:
            print("dependent_allreduce: ranks %d ops %d kib %d total_ms %.2f max_us %.1f "
                  "median_us %.1f" % (size, args.ops, args.kib, total_ms, max(calls),
                                      statistics.median(calls)), flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
