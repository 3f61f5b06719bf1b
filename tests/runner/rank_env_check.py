"""Run by kolorun on every rank (tests/runner/CMakeLists.txt): torchrun's variables agree with
kolo's own view of the job, the flags kolorun was given reached kolo's configuration, and an
all-reduce over the ranks gives the sum computed from every rank's known input. Exits non-zero
on any mismatch, so kolorun fails.

    rank_env_check.py          launched by kolorun over mpirun: MASTER_PORT is torchrun's default
    rank_env_check.py --gloo   launched by kolorun --gloo: no MPI launcher's variables, and the
                               port is the free one kolo.local_launch chose"""
import os
import sys

import torch

import kolo.torch as hvd


def main():
    gloo = sys.argv[1:] == ["--gloo"]
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    want = {
        "RANK": str(rank),
        "WORLD_SIZE": str(size),
        "LOCAL_RANK": str(hvd.local_rank()),
        "LOCAL_WORLD_SIZE": str(hvd.local_size()),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": os.environ.get("MASTER_PORT", "") if gloo else "29500",
        # From kolorun's --cycle-time-ms 3 --fusion-threshold-mb 2 in the test's command.
        "KOLO_CYCLE_TIME": "3",
        "KOLO_FUSION_THRESHOLD": str(2 * 1024 * 1024),
    }
    wrong = ["%s=%r (want %r)" % (k, os.environ.get(k), v) for k, v in want.items()
             if os.environ.get(k) != v]
    if gloo:
        if not os.environ.get("MASTER_PORT", "").isdigit():
            wrong.append("MASTER_PORT=%r (want a port)" % os.environ.get("MASTER_PORT"))
        mpi = sorted(k for k in os.environ if k.startswith(("OMPI_", "PMIX_")))
        if mpi:
            wrong.append("an MPI launcher's variables: %s" % ", ".join(mpi))
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
