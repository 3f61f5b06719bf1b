#!/usr/bin/env python3
"""Time per training step: kolo.torch (Horovod's API) against PyTorch DDP over gloo.

    mpirun -np 2 /usr/bin/python3 bench/torch_step.py [--steps 20] [--blocks 5] [--batch 16]

One process per rank runs both, on the same model (a ResNet-style CNN defined here, with many
parameter tensors, no download), the same batch and the same ranks: a step is forward +
backward + optimizer step, with gradients averaged across ranks either by
kolo.torch.DistributedOptimizer (per-parameter hooks, kolo's fusion) or by
torch.nn.parallel.DistributedDataParallel (gloo, bucketed all-reduce). The two are timed in
alternating blocks (A B A B ...), and the median per-step time of each is printed by rank 0
with the ratio kolo / DDP (lower is better for kolo).

DDP's process group uses the ranks mpirun gives (OMPI_COMM_WORLD_RANK/SIZE) and a TCP
rendezvous on 127.0.0.1 (--port).
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import kolo.torch as hvd


class Block(nn.Module):
    """A basic residual block: conv-bn-relu-conv-bn plus the shortcut."""

    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(y)))


class SmallResNet(nn.Module):
    """3 stages of `blocks` residual blocks (widths 16, 32, 64) on 32x32 inputs, 10 classes."""

    def __init__(self, blocks=6):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        layers = []
        width = 16
        for stage, w in enumerate((16, 32, 64)):
            if w != width:
                layers += [nn.Conv2d(width, w, 1, stride=2, bias=False), nn.BatchNorm2d(w)]
                width = w
            layers += [Block(w) for _ in range(blocks)]
        self.body = nn.Sequential(*layers)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.bn(self.stem(x)))
        x = self.body(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def time_steps(model, optimizer, data, target, steps, losses=None):
    """Mean seconds per step over `steps` steps (all ranks in step: each step communicates).
    `losses`, when a list, gets each step's loss."""
    start = time.perf_counter()
    for _ in range(steps):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()
        if losses is not None:
            losses.append(loss.item())
    return (time.perf_counter() - start) / steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=10, help="steps per timed block")
    parser.add_argument("--blocks", type=int, default=5, help="timed blocks per path")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps per path")
    parser.add_argument("--batch", type=int, default=16, help="images per rank")
    parser.add_argument("--depth", type=int, default=6, help="residual blocks per stage")
    parser.add_argument("--port", type=int, default=29517, help="gloo rendezvous port")
    args = parser.parse_args()

    torch.set_num_threads(1)  # ranks share the cores; one intra-op thread each
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}",
                            rank=rank, world_size=size)

    torch.manual_seed(0)
    base = SmallResNet(args.depth)
    n_tensors = sum(1 for _ in base.parameters())
    n_params = sum(p.numel() for p in base.parameters())

    kolo_model = SmallResNet(args.depth)
    kolo_model.load_state_dict(base.state_dict())
    kolo_opt = hvd.DistributedOptimizer(
        torch.optim.SGD(kolo_model.parameters(), lr=0.01, momentum=0.9),
        named_parameters=kolo_model.named_parameters())

    ddp_model = SmallResNet(args.depth)
    ddp_model.load_state_dict(base.state_dict())
    ddp = nn.parallel.DistributedDataParallel(ddp_model)
    ddp_opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)

    gen = torch.Generator().manual_seed(1 + rank)
    data = torch.randn(args.batch, 3, 32, 32, generator=gen)
    target = torch.randint(0, 10, (args.batch,), generator=gen)

    time_steps(kolo_model, kolo_opt, data, target, args.warmup)
    time_steps(ddp, ddp_opt, data, target, args.warmup)
    kolo_times, ddp_times = [], []
    for block in range(args.blocks):
        # Alternate which path goes first, so drift does not favour one.
        order = [("kolo", kolo_model, kolo_opt), ("ddp", ddp, ddp_opt)]
        if block % 2:
            order.reverse()
        for name, model, opt in order:
            t = time_steps(model, opt, data, target, args.steps)
            (kolo_times if name == "kolo" else ddp_times).append(t)

    # Both paths keep the replicas identical; check it, so a fast-but-wrong path cannot pass.
    for name, model in (("kolo", kolo_model), ("ddp", ddp_model)):
        flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        gathered = hvd.allgather(flat.unsqueeze(0), name=f"check.{name}")
        spread = (gathered - gathered[0]).abs().max().item()
        if spread > 1e-5:
            raise SystemExit(f"rank {rank}: {name} replicas differ across ranks by {spread}")

    if rank == 0:
        k, d = statistics.median(kolo_times), statistics.median(ddp_times)
        print(f"# torch_step: SmallResNet(depth {args.depth}): {n_tensors} parameter tensors, "
              f"{n_params} parameters; batch {args.batch}/rank, {size} ranks, "
              f"torch {torch.__version__}")
        print(f"# median of {args.blocks} blocks of {args.steps} steps, paths alternating")
        print(f"kolo.torch DistributedOptimizer : {k * 1e3:8.2f} ms/step")
        print(f"DDP (gloo)                      : {d * 1e3:8.2f} ms/step")
        print(f"ratio kolo / DDP                : {k / d:8.3f}")
    dist.destroy_process_group()
    hvd.shutdown()


if __name__ == "__main__":
    main()
