#!/usr/bin/env python3
"""Time per training step of PyTorch DDP on torch.distributed's backend "kolo" against DDP on
gloo, the same model, batch and ranks, in one run.

    mpirun -np 2 /usr/bin/python3 bench/ddp_step.py [--batch 16] [--steps 10] [--blocks 5]
    python -m kolo.local_launch -np 2 -- /usr/bin/python3 bench/ddp_step.py --check

The model is torch_step.py's SmallResNet (many parameter tensors, BatchNorm buffers that DDP
broadcasts every forward). The default group is "kolo"; the gloo group has the same ranks
(``dist.new_group(backend="gloo")``). A step is forward + backward (DDP's bucket all-reduces)
+ SGD step; the two are timed in alternating blocks (A B A B ...), each starting from the same
weights, and rank 0 prints the median per-step time of each and the ratio kolo / gloo (lower is
better for kolo), beside two references timed in the same blocks: the steps without DDP (the
floor) and DDP with a hook that communicates nothing (DDP's own cost). Then kolo's negotiation
per step: collectives, response cache hits and misses, and the background thread's negotiation
time per collective (over one more block of kolo alone).

``--check`` first trains ``--check-steps`` steps on each group from the same weights on the same
batches and fails (exit 1 on every rank) unless the losses agree to a relative 1e-5 (float32:
the two backends sum in different orders) and the replicas are identical across ranks.
"""
import argparse
import os
import statistics
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import kolo.torch.distributed  # noqa: F401 - registers the backend "kolo"
from kolo import _kolo

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_step import SmallResNet, time_steps  # noqa: E402 - after the path

LOSS_RTOL = 1e-5


def replica(base, group, broadcast_buffers=True):
    model = SmallResNet(base.depth)
    model.load_state_dict(base.state_dict())
    ddp = DDP(model, process_group=group, broadcast_buffers=broadcast_buffers)
    return ddp, torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)


def no_communication_hook(state, bucket):
    """A DDP communication hook that leaves each bucket as it is (each rank keeps its own
    gradients): what DDP costs without any backend."""
    future = torch.futures.Future()
    future.set_result(bucket.buffer() if hasattr(bucket, "buffer") else bucket.get_tensor())
    return future


def check(args, base, gloo, data, target):
    """The --check run: the same losses on both groups, identical replicas on every rank."""
    losses = {}
    for name, group in (("kolo", None), ("gloo", gloo)):
        ddp, opt = replica(base, group)
        losses[name] = []
        time_steps(ddp, opt, data, target, args.check_steps, losses[name])
        flat = torch.cat([p.detach().reshape(-1) for p in ddp.parameters()])
        gathered = [torch.zeros_like(flat) for _ in range(dist.get_world_size())]
        dist.all_gather(gathered, flat, group=gloo)
        spread = max((g - gathered[0]).abs().max().item() for g in gathered)
        if spread != 0.0:
            return "%s replicas differ across ranks by %g" % (name, spread)
    worst = max(abs(k - g) / abs(g) for k, g in zip(losses["kolo"], losses["gloo"]))
    if dist.get_rank() == 0:
        print("check: %d steps, losses kolo %s, gloo %s: relative difference %.3g"
              % (args.check_steps, ["%.6f" % v for v in losses["kolo"]],
                 ["%.6f" % v for v in losses["gloo"]], worst), flush=True)
    if worst > LOSS_RTOL:
        return "losses differ by %.3g (relative) > %g" % (worst, LOSS_RTOL)
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=10, help="steps per timed block")
    p.add_argument("--blocks", type=int, default=5, help="timed blocks per backend")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per backend")
    p.add_argument("--batch", type=int, default=16, help="images per rank")
    p.add_argument("--depth", type=int, default=6, help="residual blocks per stage")
    p.add_argument("--check", action="store_true", help="check the losses against gloo first")
    p.add_argument("--check-steps", type=int, default=3)
    args = p.parse_args()

    torch.set_num_threads(1)  # ranks share the cores; one intra-op thread each
    dist.init_process_group("kolo")
    rank, size = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    torch.manual_seed(0)
    base = SmallResNet(args.depth)
    base.depth = args.depth
    gen = torch.Generator().manual_seed(1 + rank)
    data = torch.randn(args.batch, 3, 32, 32, generator=gen)
    target = torch.randint(0, 10, (args.batch,), generator=gen)

    failure = check(args, base, gloo, data, target) if args.check else None
    failed = torch.tensor([1.0 if failure else 0.0])
    dist.all_reduce(failed, group=gloo)
    if failed.item():
        print("rank %d: FAILED: %s" % (rank, failure or "another rank failed"), flush=True)
        sys.exit(1)

    paths = {"kolo": replica(base, None), "gloo": replica(base, gloo)}
    # The floor: the same steps without DDP (no communication at all), timed alongside.
    plain = SmallResNet(args.depth)
    plain.load_state_dict(base.state_dict())
    paths["none"] = (plain, torch.optim.SGD(plain.parameters(), lr=0.01, momentum=0.9))
    # DDP's own cost: its hooks and bucket copies, with a hook that communicates nothing and
    # no broadcast of the buffers.
    paths["ddp"] = replica(base, gloo, broadcast_buffers=False)
    paths["ddp"][0].register_comm_hook(None, no_communication_hook)
    for ddp, opt in paths.values():
        time_steps(ddp, opt, data, target, args.warmup)
    times = {name: [] for name in paths}
    for block in range(args.blocks):
        order = list(paths) if block % 2 == 0 else list(reversed(list(paths)))
        for name in order:
            t = time_steps(*paths[name], data, target, args.steps)
            times[name].append(t)
    # kolo's negotiation over one more block of kolo alone (its idle cycles during the gloo
    # blocks would count otherwise).
    before = _kolo.negotiation_stats()
    time_steps(*paths["kolo"], data, target, args.steps)
    after = _kolo.negotiation_stats()
    if rank == 0:
        k, g = statistics.median(times["kolo"]), statistics.median(times["gloo"])
        n_tensors = sum(1 for _ in base.parameters())
        n_params = sum(q.numel() for q in base.parameters())
        print("# ddp_step: SmallResNet(depth %d): %d parameter tensors, %d parameters; batch "
              "%d/rank, %d ranks, torch %s" % (args.depth, n_tensors, n_params, args.batch,
                                               size, torch.__version__))
        print("# median of %d blocks of %d steps, backends alternating"
              % (args.blocks, args.steps))
        print("DDP on kolo : %8.2f ms/step" % (k * 1e3))
        print("DDP on gloo : %8.2f ms/step" % (g * 1e3))
        print("ratio kolo / gloo : %6.3f" % (k / g))
        print("no DDP (floor) : %8.2f ms/step (the same steps without communication)"
              % (statistics.median(times["none"]) * 1e3))
        print("DDP, nothing communicated : %8.2f ms/step (a hook that returns the bucket, "
              "buffers not broadcast)" % (statistics.median(times["ddp"]) * 1e3))
        total_steps = args.steps
        d = {key: after[key] - before[key] for key in ("cache_hits", "cache_misses",
                                                       "negotiate_ns", "cycles")}
        ops = d["cache_hits"] + d["cache_misses"]
        print("kolo per step: %.1f collectives, %.1f cache hits, %.1f misses, %.1f cycles; "
              "negotiation %.1f us per collective"
              % (ops / total_steps, d["cache_hits"] / total_steps,
                 d["cache_misses"] / total_steps, d["cycles"] / total_steps,
                 d["negotiate_ns"] / 1e3 / max(ops, 1)), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
