#!/usr/bin/env python3
"""Data-parallel training with kolo.torch (Horovod's API) on scikit-learn's digits, checked
against a single-process run.

    source scripts/env.sh   # as root: Open MPI's variables
    PYTHONPATH=build/python mpirun --oversubscribe -np 2 /usr/bin/python3 examples/train_digits.py

Works with any number of ranks (1, 2, 3, ...). What it does:

- Data: the 1797 8x8 digit images bundled with scikit-learn (no download), pixels scaled to
  [0, 1]; a fixed 80/20 split (1438 train, 359 test).
- Model: an MLP 64 -> 128 -> 64 -> 10 with ReLU, in float64. Each rank initialises it from a
  different seed, then ``hvd.broadcast_parameters(model.state_dict(), root_rank=0)`` and
  ``hvd.broadcast_optimizer_state(optimizer, root_rank=0)`` make every rank start from rank 0's
  weights and optimizer state.
- Training: SGD with momentum wrapped in ``hvd.DistributedOptimizer(..., named_parameters=...)``
  (op=Average). Every epoch the training set is shuffled with a seed every rank knows, and cut
  into global batches of B = 60 rows (the last incomplete batch is dropped). Rank r of `size`
  takes rows [r*B//size, (r+1)*B//size) of each global batch.
- The loss, and why the averaged gradient is the full batch's: rank r's loss is the *sum* of
  its rows' cross entropies times size/B. The DistributedOptimizer averages the gradients over
  the ranks, so the update uses
      (1/size) * sum_r (size/B) * sum_{i in shard r} grad l_i = (1/B) * sum_{i in batch} grad l_i,
  the gradient of the mean cross entropy over the whole global batch, whatever the number of
  ranks: with equal shards (size divides B, as for 1, 2, 3, 4, 5, 6 ranks) this is the usual
  per-shard mean; with unequal ones (size 7: shards of 8 and 9 rows) it is still exact.
- Rank 0 prints the mean training loss (an all-reduce of the shard losses) and the test
  accuracy after each epoch.

At the end it checks, and exits with status 1 on every rank if any check fails:
  (a) all-gathered parameters are bit-identical on every rank;
  (b) rank 0 retrains a single-process reference (same initial weights, same global batches,
      plain torch.optim.SGD on the mean loss of all B rows) and the distributed model matches
      it to within 1e-5 (max abs difference of the parameters);
  (c) the test accuracy is at least 0.90.
"""

import argparse
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits

import kolo.torch as hvd


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=60, help="global batch size B")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--tolerance", type=float, default=1e-5,
                        help="largest allowed parameter difference to the reference")
    parser.add_argument("--min-accuracy", type=float, default=0.90)
    return parser.parse_args()


def load_data(seed):
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float64)
    y = torch.tensor(digits.target, dtype=torch.int64)
    order = torch.from_numpy(np.random.RandomState(seed).permutation(len(x)))
    n_test = len(x) // 5
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def make_model():
    return torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.ReLU(),
        torch.nn.Linear(128, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 10))


def global_batches(n_train, batch_size, seed, epoch):
    """The row indices of each global batch of an epoch: the same on every rank."""
    order = torch.from_numpy(np.random.RandomState(seed + 1 + epoch).permutation(n_train))
    return [order[i * batch_size:(i + 1) * batch_size] for i in range(n_train // batch_size)]


def accuracy(model, x, y):
    with torch.no_grad():
        return (model(x).argmax(dim=1) == y).double().mean().item()


def flat_parameters(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def train_reference(initial_state, x_train, y_train, args):
    """One process, whole global batches, plain SGD: what the distributed run must equal."""
    model = make_model()
    model.load_state_dict(initial_state)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    for epoch in range(args.epochs):
        for rows in global_batches(len(x_train), args.batch_size, args.seed, epoch):
            optimizer.zero_grad()
            F.cross_entropy(model(x_train[rows]), y_train[rows]).backward()
            optimizer.step()
    return model


def main():
    args = parse_args()
    torch.set_default_dtype(torch.float64)
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    B = args.batch_size
    lo, hi = rank * B // size, (rank + 1) * B // size  # this rank's rows of a global batch

    x_train, y_train, x_test, y_test = load_data(args.seed)
    steps = len(x_train) // B

    torch.manual_seed(args.seed + rank)  # different on purpose: the broadcast must fix it
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         op=hvd.Average)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    initial_state = {k: v.detach().clone() for k, v in model.state_dict().items()}

    if rank == 0:
        shards = [(r + 1) * B // size - r * B // size for r in range(size)]
        print("kolo.torch on digits: %d rank(s), global batch %d (rows per rank: %s), "
              "%d train / %d test, %d steps per epoch"
              % (size, B, "/".join(map(str, shards)), len(x_train), len(x_test), steps),
              flush=True)

    start = time.time()
    test_accuracy = 0.0
    for epoch in range(args.epochs):
        model.train()
        loss_total = 0.0
        for rows in global_batches(len(x_train), B, args.seed, epoch):
            shard = rows[lo:hi]
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x_train[shard]), y_train[shard],
                                   reduction="sum") * (size / B)
            loss.backward()
            optimizer.step()
            loss_total += loss.item()
        # The ranks' shard losses average to each batch's mean loss.
        epoch_loss = hvd.allreduce(torch.tensor(loss_total), op=hvd.Average,
                                   name="epoch_loss").item() / steps
        if rank == 0:
            model.eval()
            test_accuracy = accuracy(model, x_test, y_test)
            print("epoch %2d/%d  loss %.4f  test accuracy %.4f" %
                  (epoch + 1, args.epochs, epoch_loss, test_accuracy), flush=True)
    elapsed = time.time() - start

    # (a) every rank holds the same parameters
    gathered = hvd.allgather(flat_parameters(model).unsqueeze(0), name="final_parameters")
    spread = (gathered - gathered[0]).abs().max().item()

    verdict = None
    if rank == 0:
        failures = []
        print("training: %.1f s; parameters on all %d ranks: %s (%d values)"
              % (elapsed, size, "identical" if spread == 0 else "DIFFER by %g" % spread,
                 gathered.shape[1]), flush=True)
        if spread != 0:
            failures.append("parameters differ between ranks (max abs diff %g)" % spread)

        # (b) the single-process reference
        reference = train_reference(initial_state, x_train, y_train, args)
        diff = (flat_parameters(reference) - flat_parameters(model)).abs().max().item()
        ref_accuracy = accuracy(reference, x_test, y_test)
        if diff <= args.tolerance:
            print("equivalence check: PASSED (max abs diff %.3g <= %g; reference test accuracy "
                  "%.4f)" % (diff, args.tolerance, ref_accuracy), flush=True)
        else:
            print("equivalence check: FAILED (max abs diff %.3g > %g)" % (diff, args.tolerance),
                  flush=True)
            failures.append("distributed model differs from the single-process reference")

        # (c) it learned
        if test_accuracy < args.min_accuracy:
            failures.append("test accuracy %.4f < %.2f" % (test_accuracy, args.min_accuracy))
        print("final test accuracy %.4f (minimum %.2f)" % (test_accuracy, args.min_accuracy),
              flush=True)
        for failure in failures:
            print("FAILED: " + failure, flush=True)
        verdict = not failures

    ok = hvd.broadcast_object(verdict, root_rank=0, name="verdict")
    hvd.shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
