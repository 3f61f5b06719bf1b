#!/usr/bin/env python3
"""What one all-reduce costs the submitting thread: many small tensors through Horovod's API,
``allreduce_async_`` for each, then ``synchronize`` for each, timed per tensor.

    [mpirun -np N] /usr/bin/python3 bench/submission_cost.py [--tensors 1000] [--elements 16]
        [--steps 20] [--warmup 3] [--backend kolo|horovod]

The tensors are so small that the data costs nothing: what is timed is the binding (argument
checks, the hand-over to the runtime, the handle) and the runtime's work per tensor. Each step
refills the tensors (untimed), starts the ranks together with a one-element all-reduce, then times
the submissions and the synchronizations apart. A step's times are the slower rank's. Rank 0
prints the median over the steps of the microseconds per tensor: submission, synchronization and
their sum, the fastest and the slowest step, and how many times Python's garbage collector
walked every object (a generation-2 collection, counted through ``gc.callbacks``) during the
timed steps on the slower rank: each such walk stalls the step it falls in (tens of ms under
torch). The first and last timed steps' results are checked against the sum of every rank's
input (exact in float32); a wrong element makes every rank exit with status 1.

Where the ranks have a core each the submissions run beside the runtime's background thread; on
more ranks than cores they share it, as a training step's Python does.
"""
import argparse
import gc
import importlib
import statistics
import sys
import time

import torch


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tensors", type=int, default=1000, help="tensors per step")
    parser.add_argument("--elements", type=int, default=16, help="float32 elements per tensor")
    parser.add_argument("--steps", type=int, default=20, help="timed steps")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--backend", choices=("kolo", "horovod"), default="kolo",
                        help="kolo.torch, or horovod.torch where Horovod is installed")
    args = parser.parse_args()
    if args.tensors < 1 or args.elements < 1 or args.steps < 1 or args.warmup < 0:
        parser.error("--tensors, --elements and --steps must be at least 1, --warmup at least 0")

    torch.set_num_threads(1)
    hvd = importlib.import_module(args.backend + ".torch")
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    # Tensor k holds k + j at element j, times (rank + 1): sums stay exact in float32.
    bases = [torch.arange(args.elements, dtype=torch.float32) + k for k in range(args.tensors)]
    inputs = [b * (rank + 1) for b in bases]
    tensors = [torch.empty_like(b) for b in bases]
    names = ["submission_cost.%d" % k for k in range(args.tensors)]
    total = size * (size + 1) // 2

    def Step():
        for t, x in zip(tensors, inputs):
            t.copy_(x)
        hvd.allreduce(torch.zeros(1), name="submission_cost.start", op=hvd.Sum)
        begin = time.perf_counter()
        handles = [hvd.allreduce_async_(t, name=n, op=hvd.Sum) for t, n in zip(tensors, names)]
        submitted = time.perf_counter()
        for h in handles:
            hvd.synchronize(h)
        done = time.perf_counter()
        return submitted - begin, done - submitted

    def Wrong():
        return sum(int((t != b * total).sum()) for t, b in zip(tensors, bases))

    walks = [0]  # generation-2 collections while counting

    def CountWalk(phase, info):
        if phase == "stop" and info["generation"] == 2:
            walks[0] += 1

    for _ in range(args.warmup):
        Step()
    gc.callbacks.append(CountWalk)
    submit, sync, wrong = [], [], 0
    for s in range(args.steps):
        times = torch.tensor(Step(), dtype=torch.float64)
        if s in (0, args.steps - 1):
            wrong += Wrong()
        slower = hvd.allreduce(times, name="submission_cost.times", op=hvd.Max)
        submit.append(float(slower[0]) / args.tensors * 1e6)
        sync.append(float(slower[1]) / args.tensors * 1e6)
    gc.callbacks.remove(CountWalk)
    wrong = int(hvd.allreduce(torch.tensor([wrong], dtype=torch.int64),
                              name="submission_cost.wrong", op=hvd.Sum)[0])
    walks = int(hvd.allreduce(torch.tensor(walks, dtype=torch.int64),
                              name="submission_cost.walks", op=hvd.Max)[0])
    if rank == 0:
        both = [a + b for a, b in zip(submit, sync)]
        print("submission_cost: backend %s ranks %d tensors %d elements %d steps %d "
              "submit_us %.2f synchronize_us %.2f per_tensor_us %.2f min %.2f max %.2f "
              "full_collections %d wrong %d"
              % (args.backend, size, args.tensors, args.elements, args.steps,
                 statistics.median(submit), statistics.median(sync), statistics.median(both),
                 min(both), max(both), walks, wrong), flush=True)
    hvd.shutdown()
    if wrong:
        if rank == 0:
            print("submission_cost: FAILED, %d wrong elements over the ranks" % wrong,
                  file=sys.stderr, flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
