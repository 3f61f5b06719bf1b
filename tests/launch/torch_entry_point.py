#!/usr/bin/env python3
"""One rank of a job that makes a group of backend "kolo" without importing kolo: torch (2.14
and newer) finds the backend through the entry point that kolo's installed package declares in
the group ``torch.distributed.backends``. Needs kolo installed (pip: the entry point lives in its
metadata, which the build tree lacks) and run under torchrun or kolo.local_launch (the env://
variables). Checks that ``import torch`` loads no kolo, that an all_reduce gives the sum over the
ranks, that kolo was loaded by the group's creation, and that no libmpi is mapped (kolo started
without MPI). Prints "PASSED rank R"."""
import os
import sys

import torch
import torch.distributed as dist


def fail(rank, message):
    print("FAILED rank %s: %s" % (rank, message), flush=True)
    sys.exit(1)


rank = os.environ.get("RANK", "?")
if not hasattr(dist.Backend, "_ensure_backend_registered"):
    fail(rank, "torch %s reads no torch.distributed.backends entry points (2.14 and newer do)"
         % torch.__version__)
loaded = sorted(m for m in sys.modules if m == "kolo" or m.startswith("kolo."))
if loaded:
    fail(rank, "import torch loaded %s" % loaded)

dist.init_process_group("kolo")
rank, size = dist.get_rank(), dist.get_world_size()
if dist.get_backend() != "kolo":
    fail(rank, "the default group's backend is %r" % dist.get_backend())
if "kolo.torch.distributed" not in sys.modules:
    fail(rank, "a group of backend kolo was made without loading kolo.torch.distributed")
t = torch.full((5,), float(rank + 1), dtype=torch.float64) * torch.arange(1, 6)
dist.all_reduce(t)
expected = [float(size * (size + 1) // 2 * k) for k in range(1, 6)]
if t.tolist() != expected:
    fail(rank, "all_reduce gave %s, expected %s" % (t.tolist(), expected))
with open("/proc/self/maps") as maps:
    mpi = sorted({line.split()[-1] for line in maps if "libmpi" in line})
if mpi:
    fail(rank, "MPI is loaded: %s" % mpi)
dist.destroy_process_group()
print("PASSED rank %d" % rank, flush=True)
