#!/usr/bin/env python3
"""Time per all-reduce of one float32 CPU tensor through kolo.torch: op=Sum against op=Adasum.

    mpirun -np 2 /usr/bin/python3 bench/adasum_cost.py [--sizes 4K,64K,1M,16M] [--blocks 5]

Adasum does Rabenseifner's halving and doubling plus a small all-reduce of dot products per
level and a second pass over the data (collectives/ALGORITHMS.md, "adasum"); this shows what
that costs next to the Sum the selector picks for the same size. Per size, the two ops run in
alternating blocks (Sum, Adasum, Sum, ...) of calls on the same tensor and name (so the response
cache serves them, as in training); a block's time is its per-call mean, the max over ranks,
and rank 0 prints the median block of each with the ratio Adasum / Sum. The rank count must be
a power of two.
"""
import argparse
import statistics
import time

import torch

import kolo.torch as hvd


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def block(tensor, op, name, calls):
    """Per-call mean of `calls` in-place all-reduces, the max over ranks (seconds)."""
    start = time.perf_counter()
    for _ in range(calls):
        hvd.allreduce_(tensor, op=op, name=name)
    mine = (time.perf_counter() - start) / calls
    return float(hvd.allreduce(torch.tensor([mine], dtype=torch.float64), op=hvd.Max,
                               name="adasum_cost.time"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4K,64K,1M,16M", help="bytes per tensor, comma list")
    parser.add_argument("--blocks", type=int, default=5, help="timed blocks per op and size")
    parser.add_argument("--target-ms", type=float, default=100, help="time per block")
    args = parser.parse_args()
    hvd.init()
    if hvd.size() & (hvd.size() - 1):
        raise SystemExit("Adasum needs a power-of-two number of ranks, not %d" % hvd.size())
    if hvd.rank() == 0:
        print("%d ranks, float32, median of %d blocks; time per call" % (hvd.size(), args.blocks))
        print("%10s %12s %12s %8s" % ("bytes", "Sum (us)", "Adasum (us)", "ratio"))
    for size in (parse_size(s) for s in args.sizes.split(",")):
        # Zeros: neither op has a value-dependent path (and no subnormals arise), and repeated
        # in-place Sums of zeros stay finite.
        tensor = torch.zeros(size // 4)
        name = {hvd.Sum: "adasum_cost.sum.%d" % size, hvd.Adasum: "adasum_cost.ada.%d" % size}
        # Warm up both and size the blocks from Sum's time.
        for op in (hvd.Sum, hvd.Adasum):
            block(tensor, op, name[op], 3)
        calls = max(1, int(args.target_ms / 1e3 / max(block(tensor, hvd.Sum, name[hvd.Sum], 3),
                                                       1e-6)))
        calls = int(hvd.allreduce(torch.tensor([calls]), op=hvd.Min, name="adasum_cost.calls"))
        times = {hvd.Sum: [], hvd.Adasum: []}
        for _ in range(args.blocks):
            for op in (hvd.Sum, hvd.Adasum):
                times[op].append(block(tensor, op, name[op], calls))
        if hvd.rank() == 0:
            s = statistics.median(times[hvd.Sum]) * 1e6
            a = statistics.median(times[hvd.Adasum]) * 1e6
            print("%10d %12.1f %12.1f %8.2f" % (size, s, a, a / s))
    hvd.shutdown()


if __name__ == "__main__":
    main()
