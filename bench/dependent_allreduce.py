#!/usr/bin/env python3
"""Dependent small all-reduces through Horovod's API (kolo.torch): the latency a training loop
sees when each all-reduce needs the previous one's result.

    mpirun -np 2 /usr/bin/python3 bench/dependent_allreduce.py [--ops 200] [--runs 1] [--kib 1]
        [--backend kolo|horovod]

Each run times --ops calls of ``t = hvd.allreduce(t)`` on a float32 tensor of --kib KiB (each
call waits for the one before, so nothing overlaps and every call pays a whole cycle: submit,
negotiate, all-reduce, complete). Rank 0 prints one line per run: the run's total in ms, and the
slowest and median single call in us. Each run's result is checked against the value computed
from the ranks' known inputs (a wrong value fails the run).

--split times each call in its two halves, on every rank: the submission (``allreduce_async``:
Python, the binding and ``kolo_enqueue``, nothing that waits for a peer) and the wait for the
result (``synchronize``: negotiation, the all-reduce, the completion), and adds the background
thread's negotiation counters (``kolo._kolo.negotiation_stats()``) for the run; every rank
prints one more line per run with their medians and per-cycle means, and its --cpu-loop time.
These calls skip what ``hvd.allreduce`` adds around the same two (its autograd function), so a
run with --split is a little faster than one without.

--cpu-loop (implied by --split) times a fixed loop of Python on every rank just before each run,
without kolo: the speed of the rank's core at the time (the host may give a vCPU less for
seconds at a time). Rank 0's line then ends with the fastest and the slowest rank's loop.
Where the time of a slow run goes: docs/benchmarks.md, "Where a slow process's dependent
all-reduces spend their time".

--backend horovod makes the same calls through ``horovod.torch`` where Horovod is installed (it is
not part of the project); --split needs kolo's counters and is kolo's only.
"""
import argparse
import importlib
import statistics
import sys
import time

import torch


def CpuLoopMs():
    """The time of a fixed loop of Python (100000 additions) in ms: the speed of this rank's
    core at the moment, without kolo (the host may give a vCPU less for seconds at a time)."""
    start = time.perf_counter()
    x = 0
    for i in range(100000):
        x += i
    return (time.perf_counter() - start) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=200, help="dependent all-reduces per run")
    parser.add_argument("--runs", type=int, default=1, help="timed runs")
    parser.add_argument("--kib", type=int, default=1, help="tensor size in KiB")
    parser.add_argument("--warmup", type=int, default=20, help="untimed calls first")
    parser.add_argument("--split", action="store_true",
                        help="also time submission and wait apart, on every rank")
    parser.add_argument("--cpu-loop", action="store_true",
                        help="time a fixed loop of Python on every rank before each run")
    parser.add_argument("--backend", choices=("kolo", "horovod"), default="kolo",
                        help="kolo.torch, or horovod.torch where Horovod is installed")
    args = parser.parse_args()
    if args.split and args.backend != "kolo":
        parser.error("--split reads kolo's own counters: --backend kolo only")
    hvd = importlib.import_module(args.backend + ".torch")
    hvd.init()
    if args.split:
        from kolo import _kolo  # kolo's own counters
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
        cpu_loop_ms = CpuLoopMs() if args.split or args.cpu_loop else None
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
        loop_text = ""
        if cpu_loop_ms is not None:
            # The fastest and the slowest rank's loop (after the run: the all-reduces that
            # gather them are not timed).
            loops = [hvd.allreduce(torch.tensor([cpu_loop_ms], dtype=torch.float64), op=op,
                                   name="cpu_loop_" + label).item()
                     for op, label in ((hvd.Min, "min"), (hvd.Max, "max"))]
            loop_text = " cpu_loop_ms_min %.2f cpu_loop_ms_max %.2f" % tuple(loops)
        if hvd.rank() == 0:
            print("dependent_allreduce: ranks %d ops %d kib %d total_ms %.2f max_us %.1f "
                  "median_us %.1f%s" % (size, args.ops, args.kib, total_ms, max(calls),
                                        statistics.median(calls), loop_text), flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
