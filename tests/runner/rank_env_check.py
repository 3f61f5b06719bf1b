"""Run by kolorun on every rank (tests/runner/CMakeLists.txt): torchrun's variables agree with
kolo's own view of the job, the flags kolorun was given reached kolo's configuration, and an
all-reduce over the ranks gives the sum computed from every rank's known input. Exits non-zero
on any mismatch, so kolorun (mpirun) fails."""
import os
import sys

import torch

import kolo.torch as hvd


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    want = {
        "RANK": str(rank),
        "WORLD_SIZE": str(size),
        "LOCAL_RANK": str(hvd.local_rank()),
        "LOCAL_WORLD_SIZE": str(hvd.local_size()),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29500",
        # From kolorun's --cycle-time-ms 3 --fusion-threshold-mb 2 in the test's command.
        "KOLO_CYCLE_TIME": "3",
        "KOLO_FUSION_THRESHOLD": str(2 * 1024 * 1024),
    }
    wrong = ["%s=%r (want %r)" % (k, os.environ.get(k), v) for k, v in want.items()
             if os.environ.get(k) != v]
    got = hvd.allreduce(torch.tensor([float(rank + 1)], dtype=torch.float64), op=hvd.Sum,
                        name="rank_env_check")
    expected = size * (size + 1) / 2.0
    if got.item() != expected:
        wrong.append("all-reduce of rank+1: %r (want %r)" % (got.item(), expected))
    hvd.shutdown()
    if wrong:
        print("rank %d: %s" % (rank, "; ".join(wrong)), file=sys.stderr)
        return 1
    print("rank %d of %d: torchrun's variables and kolo agree" % (rank, size))
    return 0


if __name__ == "__main__":
    sys.exit(main())
