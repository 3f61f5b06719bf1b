#!/usr/bin/env python3
"""A plain PyTorch DDP training script on torch.distributed's backend "kolo": the only kolo line
is ``import kolo.torch.distributed``, which registers the backend.

    PYTHONPATH=build/python torchrun --standalone --nproc_per_node 2 examples/ddp_digits.py
    PYTHONPATH=build/python mpirun --oversubscribe -np 2 /usr/bin/python3 examples/ddp_digits.py
    PYTHONPATH=build/python /usr/bin/python3 -m kolo.local_launch -np 3 -- \\
        /usr/bin/python3 examples/ddp_digits.py --compare gloo

What it does: scikit-learn's 1797 8x8 digit images (no download), a fixed 80/20 split, an MLP
64 -> 128 -> 64 -> 10 in float64, seeded the same on every rank; DistributedSampler shards each
epoch's shuffled training set, DistributedDataParallel averages the gradients, SGD with momentum
steps. Rank 0 prints each epoch's mean training loss (an all_reduce of the ranks' sums) and the
test accuracy, and the script fails if the final accuracy is below 0.90.

``--backend`` (default kolo) is the default group's backend. ``--compare gloo`` trains a second
time, from the same initial weights on the same shards, with DDP over a gloo group of the same
ranks (``dist.new_group(backend="gloo")``), and fails on every rank unless both give the same
losses and parameters (relative 1e-9: float64, the same reductions in another order at most).
"""

import argparse
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import kolo.torch.distributed  # noqa: F401 - registers the backend "kolo"

TOLERANCE = 1e-9


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", default="kolo")
    p.add_argument("--compare", choices=["gloo"], help="train again over a gloo group and "
                   "check that the losses and parameters are the same")
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch", type=int, default=32, help="rows per rank and step")
    p.add_argument("--lr", type=float, default=0.05)
    return p.parse_args()


def datasets():
    x, y = load_digits(return_X_y=True)
    x = torch.tensor(x / 16.0, dtype=torch.float64)
    y = torch.tensor(y, dtype=torch.int64)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(1234))
    cut = int(0.8 * len(y))
    return TensorDataset(x[perm[:cut]], y[perm[:cut]]), (x[perm[cut:]], y[perm[cut:]])


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                               torch.nn.Linear(128, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 10)).double()


def train(args, train_set, test_set, group):
    """Trains a fresh model with DDP over ``group`` (None: the default group); returns the
    epochs' mean losses, the final accuracy and the parameters."""
    model = DDP(mlp(), process_group=group)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    sampler = DistributedSampler(train_set, num_replicas=dist.get_world_size(group),
                                 rank=dist.get_rank(group), shuffle=True, seed=7)
    loader = DataLoader(train_set, batch_size=args.batch, sampler=sampler)
    losses = []
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total = torch.zeros(2, dtype=torch.float64)  # loss sum, rows
        for x, y in loader:
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            total += torch.tensor([loss.item() * len(y), len(y)], dtype=torch.float64)
        dist.all_reduce(total, group=group)
        losses.append((total[0] / total[1]).item())
        with torch.no_grad():
            accuracy = (model(test_set[0]).argmax(1) == test_set[1]).double().mean().item()
        if dist.get_rank() == 0:
            print("[%s] epoch %d: loss %.6f, test accuracy %.4f"
                  % (dist.get_backend(group), epoch + 1, losses[-1], accuracy), flush=True)
    return losses, accuracy, [p.detach().clone() for p in model.module.parameters()]


def main():
    args = parse_args()
    dist.init_process_group(args.backend)
    train_set, test_set = datasets()
    losses, accuracy, params = train(args, train_set, test_set, None)
    failures = []
    if accuracy < 0.90:
        failures.append("test accuracy %.4f < 0.90" % accuracy)
    if args.compare:
        other = dist.new_group(backend=args.compare)
        other_losses, _, other_params = train(args, train_set, test_set, other)
        worst = max(abs(a - b) / max(abs(b), 1e-300) for a, b in zip(losses, other_losses))
        worst_param = max(((a - b).abs().max() / b.abs().max().clamp(min=1e-300)).item()
                          for a, b in zip(params, other_params))
        if dist.get_rank() == 0:
            print("%s against %s: losses differ by %.3g, parameters by %.3g (relative)"
                  % (args.backend, args.compare, worst, worst_param), flush=True)
        if worst > TOLERANCE or worst_param > TOLERANCE:
            failures.append("%s and %s differ: losses %s vs %s, parameters by %.3g"
                            % (args.backend, args.compare, losses, other_losses, worst_param))
    # Every rank's verdict: any rank's failure fails them all.
    failed = torch.tensor([1.0 if failures else 0.0], dtype=torch.float64)
    dist.all_reduce(failed)
    for f in failures:
        print("rank %d: FAILED: %s" % (dist.get_rank(), f), file=sys.stderr, flush=True)
    rank = dist.get_rank()
    dist.destroy_process_group()
    if failed.item():
        sys.exit(1)
    if rank == 0:
        print("PASSED", flush=True)


if __name__ == "__main__":
    main()
