#!/usr/bin/env python3
"""One rank of a DDP training on torch.distributed's backend "kolo" in which the last rank goes
wrong at step FAULT_STEP; run by run_ddp_fault.py. Usage: ddp_fault.py MODE

Modes (the last rank's fault):
  shape-drift       its all_reduce of the step's statistics has 3 values where the others
                    have 4
  skipped-backward  it skips loss.backward() (and so DDP's bucket all-reduces) once
  kill              it SIGKILLs itself in the middle of a backward, after some of DDP's bucket
                    all-reduces were submitted
  wrong-rank        every rank passes init_process_group a rank other than its launcher's
                    (the next one): the backend refuses it on every rank

Each rank prints, once, "FAULT-RESULT rank R: <exception type>: <message>" for the error that
ended its training (or "ok: " if none did), then "FAULT-TOOK rank R: <s>": the seconds from the
start of the faulty step to that error. It exits 0 after printing, so the driver sees every
rank's verdict.
"""
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import kolo.torch.distributed  # noqa: F401 - registers the backend "kolo"

FAULT_STEP = 3
STEPS = 6


def main():
    mode = sys.argv[1]
    if mode == "wrong-rank":
        size = int(os.environ["WORLD_SIZE"])
        rank = int(os.environ["RANK"])
        started = time.monotonic()
        try:
            dist.init_process_group("kolo", rank=(rank + 1) % size, world_size=size)
            verdict = "ok: "
        except Exception as e:  # noqa: BLE001 - the verdict is what the driver checks
            verdict = "%s: %s" % (type(e).__name__, " ".join(str(e).split()))
        print("FAULT-RESULT rank %d: %s\nFAULT-TOOK rank %d: %.2f"
              % (rank, verdict, rank, time.monotonic() - started), flush=True)
        os._exit(0)
    dist.init_process_group("kolo")
    rank, last = dist.get_rank(), dist.get_world_size() - 1
    torch.manual_seed(0)
    # Two buckets: a large layer alone, then the rest (bucket_cap_mb below).
    model = torch.nn.Sequential(torch.nn.Linear(32, 2048), torch.nn.ReLU(),
                                torch.nn.Linear(2048, 4))
    ddp = DDP(model, bucket_cap_mb=0.1)
    if mode == "kill" and rank == last:
        def die(grad):
            os.kill(os.getpid(), signal.SIGKILL)
            return grad
        fault_hook = [None]
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    started = None
    try:
        for step in range(STEPS):
            if step == FAULT_STEP:
                started = time.monotonic()
                if mode == "kill" and rank == last:
                    # The first layer's gradient comes last in backward: by then the other
                    # bucket's all-reduce is in flight.
                    fault_hook[0] = model[0].weight.register_hook(die)
            x = torch.randn(16, 32, generator=g)
            loss = ddp(x).pow(2).mean()
            opt.zero_grad()
            if not (mode == "skipped-backward" and rank == last and step == FAULT_STEP):
                loss.backward()
            opt.step()
            stats = torch.tensor([loss.item(), 1.0, 2.0, 3.0])
            if mode == "shape-drift" and rank == last and step == FAULT_STEP:
                stats = stats[:3]
            dist.all_reduce(stats)
        verdict = "ok: "
    except Exception as e:  # noqa: BLE001 - the verdict is what the driver checks
        verdict = "%s: %s" % (type(e).__name__, " ".join(str(e).split()))
    took = time.monotonic() - started if started is not None else -1.0
    print("FAULT-RESULT rank %d: %s\nFAULT-TOOK rank %d: %.2f" % (rank, verdict, rank, took),
          flush=True)
    os._exit(0)  # no shutdown handshake with peers that may be gone


if __name__ == "__main__":
    main()
