#!/usr/bin/env python3
"""One rank of a job that starts torch.distributed's backend "kolo" with
``init_method="tcp://..."`` and explicit ranks, the launcher's variables removed first (as a
script started by a launcher of its own would be): kolo takes torch's ranks and meets at the
address torch's store gives. Run under kolo.local_launch, which provides the ranks and a free
port. Prints "PASSED rank R" when an all_reduce gives the sum over the ranks."""
import os
import sys

import torch
import torch.distributed as dist

rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
port = os.environ["MASTER_PORT"]
for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
            "MASTER_PORT", "KOLO_MASTER_PORT", "KOLO_JOB_ID"):
    os.environ.pop(var, None)

import kolo.torch.distributed  # noqa: E402,F401 - registers the backend "kolo"

dist.init_process_group("kolo", init_method="tcp://127.0.0.1:%s" % port, rank=rank,
                        world_size=size)
t = torch.full((3,), float(rank + 1))
dist.all_reduce(t)
expected = float(size * (size + 1) // 2)
if t.tolist() != [expected] * 3:
    print("FAILED rank %d: all_reduce gave %s, expected %s" % (rank, t.tolist(), expected))
    sys.exit(1)
print("PASSED rank %d" % rank, flush=True)
