#!/usr/bin/env python3
"""One rank of a job that issues asynchronous all_reduces on the backend "kolo", waits for them
and exits without destroy_process_group(). Waiting used to return while the group's completer
thread was still inside torch's Future.set_result; an interpreter that then finalised aborted
the process ("terminate called without an active exception") in 2 of 3 runs. The test passes
when every rank prints "PASSED rank R" and the job exits 0."""
import torch
import torch.distributed as dist

import kolo.torch.distributed  # noqa: F401 - registers the backend "kolo"

dist.init_process_group("kolo")
tensors = [torch.ones(n) for n in (25000, 150000)]
for step in range(50):
    works = [dist.all_reduce(t, async_op=True) for t in tensors]
    for w in works:
        w.wait()
expected = float(dist.get_world_size() ** 50)
assert all(t[0].item() == expected for t in tensors), [t[0].item() for t in tensors]
print("PASSED rank %d" % dist.get_rank(), flush=True)
