#!/usr/bin/env python3
"""A step's gradients through Horovod's API: every tensor of a model's gradient set handed to
``allreduce_async_`` (in place, as Horovod's DistributedOptimizer does), last layer first, then
each waited for with ``synchronize``.

    mpirun -np 2 /usr/bin/python3 bench/gradient_set.py --model resnet50 [--op average|sum]
        [--steps 10] [--warmup 3] [--backend kolo|horovod] [--kolo-bench PATH] [--split N]

The tensors have the names and shapes of the model's parameters (``kolo-bench --model NAME
--layout``, bench/MODELS.md), each allocated by itself as a parameter's gradient is. Before
every step (untimed) each rank writes its gradients afresh, as a backward pass would; the step
is timed from the first submission to the last completion, after a one-element all-reduce that
starts the ranks together. Beside each step, interleaved, the memory floor: every tensor copied
once into another (``Tensor.copy_``, every rank at once), after the same refill. A step's time is
the slower rank's.

Rank 0 prints one line: the median, min and max step in ms for the all-reduces and for the
copies, and the median step over the median copy. The first and last timed steps' results are
checked on every rank against the values the ranks' inputs give (computed in float64); any wrong
element makes every rank exit with status 1.

--split N replaces the model's tensors by N flat ones holding as many elements in all (named
``split.<k>``): with --split 1 the set is one all-reduce of the same bytes, which is what its
step would cost without any cost per tensor.

--backend horovod runs the same steps through ``horovod.torch`` where Horovod is installed (it is
not part of the project): both the measured runtime and its floor then come from this script,
under the same launcher, so the two backends' lines compare directly. Horovod's own settings
(HOROVOD_CYCLE_TIME, HOROVOD_FUSION_THRESHOLD, ...) stay as the environment gives them;
scripts/bench_performance.sh runs it with the malloc settings of docs/machine-notes.md 2, without
which Open MPI's MPI_Allreduce, that Horovod calls, collapses at these sizes.
"""
import argparse
import importlib
import json
import math
import os
import statistics
import subprocess
import sys
import time

import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def Layout(model, kolo_bench):
    """The model's (name, shape) pairs in registration order, from kolo-bench --layout. Read
    before the backend starts MPI (no fork after MPI_Init); without the launcher's rank
    variables, so every rank's kolo-bench prints."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PMI_"))}
    env.pop("SLURM_PROCID", None)
    out = subprocess.run([kolo_bench, "--model", model, "--layout"], env=env, check=True,
                         stdout=subprocess.PIPE, universal_newlines=True).stdout
    return [(t["name"], t["shape"]) for t in map(json.loads, out.splitlines())]


def Pattern(index, numel):
    """Tensor `index`'s base values: integers up to 1021, so that every rank's input (the base
    times rank + 1) and every sum of them are exact in float32 (up to ~180 ranks). 1021 is prime
    and each tensor starts 37 further along, so no two tensors of a model hold the same values:
    a result delivered to the wrong tensor fails the check."""
    return ((torch.arange(numel, dtype=torch.int64) + 37 * index) % 1021 + 1).to(torch.float32)


def Split(layout, count):
    """The layout's elements as `count` flat tensors, the first ones one element longer where
    the total does not divide evenly."""
    total = sum(math.prod(shape) for _, shape in layout)
    if count > total:
        sys.exit("gradient_set: --split %d: the model has only %d elements" % (count, total))
    base, extra = divmod(total, count)
    return [("split.%d" % k, [base + (1 if k < extra else 0)]) for k in range(count)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="resnet50",
                        help="a layout of kolo-bench --model (resnet50, resnet101, bert-base, "
                        "tiny-1000)")
    parser.add_argument("--op", choices=("average", "sum"), default="average",
                        help="the reduction (Horovod's optimizer averages)")
    parser.add_argument("--split", type=int, default=0,
                        help="instead of the model's tensors, its elements in this many tensors "
                        "of (nearly) equal size: the same bytes, a different count of tensors")
    parser.add_argument("--steps", type=int, default=10, help="timed steps")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--backend", choices=("kolo", "horovod"), default="kolo",
                        help="kolo.torch, or horovod.torch where Horovod is installed")
    parser.add_argument("--kolo-bench", default=os.path.join(
        os.environ.get("KOLO_BUILD_DIR", os.path.join(REPO, "build")), "bench", "kolo-bench"),
                        help="the kolo-bench that gives the layout")
    args = parser.parse_args()
    if args.steps < 1 or args.warmup < 0 or args.split < 0:
        parser.error("--steps must be at least 1, --warmup and --split at least 0")

    layout = Layout(args.model, args.kolo_bench)
    if not layout:
        sys.exit("gradient_set: %s --model %s --layout printed no tensors" % (
            args.kolo_bench, args.model))
    if args.split:
        layout = Split(layout, args.split)
    # One thread per rank for torch's own copies (the refill and the floor), as for the
    # runtime's: torch would otherwise start a thread per core in every rank.
    torch.set_num_threads(1)
    hvd = importlib.import_module(args.backend + ".torch")
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    op = hvd.Average if args.op == "average" else hvd.Sum

    # Every rank's input is the base times (rank + 1): the result is the base times the sum of
    # 1..size, or its mean.
    factor = size * (size + 1) / 2 / (size if args.op == "average" else 1)
    names = [name for name, _ in layout]
    inputs = [(Pattern(k, math.prod(shape)) * (rank + 1)).reshape(shape)
              for k, (_, shape) in enumerate(layout)]
    grads = [torch.empty_like(t) for t in inputs]
    copies = [torch.empty_like(t) for t in inputs]
    order = list(reversed(range(len(layout))))  # last layer first
    start_line = torch.zeros(1)

    def Refill():
        for g, t in zip(grads, inputs):
            g.copy_(t)

    def Start():
        hvd.allreduce(start_line, name="gradient_set.start", op=hvd.Sum)

    def AllreduceStep():
        Refill()
        Start()
        begin = time.perf_counter()
        handles = [hvd.allreduce_async_(grads[k], name=names[k], op=op) for k in order]
        for h in handles:
            hvd.synchronize(h)
        return (time.perf_counter() - begin) * 1e3

    def CopyStep():
        Refill()
        Start()
        begin = time.perf_counter()
        for k in order:
            copies[k].copy_(grads[k])
        return (time.perf_counter() - begin) * 1e3

    def Wrong():
        """Wrong elements over this rank's gradients, against the float64 reference."""
        wrong = 0
        for k, (g, t) in enumerate(zip(grads, inputs)):
            # This rank's input is the base times (rank + 1), exactly.
            expected = t.reshape(-1).to(torch.float64) * (factor / (rank + 1))
            bad = ~torch.isclose(g.reshape(-1).to(torch.float64), expected, rtol=1e-6, atol=0)
            count = int(bad.sum())
            if count and wrong == 0:
                first = int(bad.nonzero()[0])
                print("gradient_set: rank %d: tensor '%s' element %d is %r, expected %r" % (
                    rank, names[k], first, g.reshape(-1)[first].item(), expected[first].item()),
                    file=sys.stderr, flush=True)
            wrong += count
        return wrong

    allreduce_ms, copy_ms, wrong = [], [], 0
    for step in range(args.warmup + args.steps):
        timed = step >= args.warmup
        # Interleaved, the order alternating, so neither always runs on the other's leftovers.
        first_allreduce = step % 2 == 0
        for kind in ("allreduce", "copy") if first_allreduce else ("copy", "allreduce"):
            if kind == "copy":
                ms = CopyStep()
                if timed:
                    copy_ms.append(ms)
                continue
            ms = AllreduceStep()
            if timed:
                allreduce_ms.append(ms)
                if step in (args.warmup, args.warmup + args.steps - 1):
                    wrong += Wrong()
    # The slower rank's time per step, and every rank's wrong elements.
    slowest = hvd.allreduce(torch.tensor(allreduce_ms + copy_ms, dtype=torch.float64),
                            name="gradient_set.times", op=hvd.Max).tolist()
    total_wrong = int(hvd.allreduce(torch.tensor([wrong], dtype=torch.int64),
                                    name="gradient_set.wrong", op=hvd.Sum).item())
    allreduce_ms, copy_ms = slowest[:args.steps], slowest[args.steps:]
    if rank == 0:
        mib = sum(t.numel() * t.element_size() for t in inputs) / 2**20
        model = args.model + (".split" if args.split else "")
        print("gradient_set: backend %s model %s ranks %d op %s tensors %d mib %.1f steps %d "
              "allreduce_ms %.2f min %.2f max %.2f copy_ms %.2f min %.2f max %.2f "
              "over_copy %.2f wrong %d" % (
                  args.backend, model, size, args.op, len(layout), mib, args.steps,
                  statistics.median(allreduce_ms), min(allreduce_ms), max(allreduce_ms),
                  statistics.median(copy_ms), min(copy_ms), max(copy_ms),
                  statistics.median(allreduce_ms) / statistics.median(copy_ms), total_wrong),
              flush=True)
    hvd.shutdown()
    if total_wrong:
        print("gradient_set: FAILED, %d wrong elements over the ranks" % total_wrong,
              file=sys.stderr, flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
