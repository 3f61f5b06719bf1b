#!/usr/bin/env python3
"""Fault tests of DDP on torch.distributed's backend "kolo": runs ddp_fault.py (the last rank
goes wrong at one step) and checks that every rank that lives ends with the expected error,
naming what went wrong, within BOUND_S of that step; a job that outlives its timeout is killed
and fails the test. Usage: run_ddp_fault.py MODE NP MPIEXEC [MPIEXEC_PREFLAGS...]
(MPIEXEC kolo.local_launch: started as torchrun starts a job, without MPI).

Expected, per mode (see ddp_fault.py):
  shape-drift, skipped-backward  every rank: kolo's deadlock report, "every rank waits for an
                                 operation that cannot complete", naming each rank's operation
                                 (shape-drift: both shapes, f32[3] and f32[4])
  kill                           every survivor: the killed rank named as gone
  wrong-rank                     every rank: the refusal, naming torch's rank and kolo's
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_fault import fail, results, run_rank_files  # noqa: E402 - after the path

BOUND_S = 10.0
TIMEOUT_S = 120


def main():
    mode, np_, mpiexec = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    last = np_ - 1
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp_fault.py")
    if mpiexec == "kolo.local_launch":
        launch = [sys.executable, "-m", mpiexec, "-np", str(np_), "--timeout", "100",
                  "--grace", "15", "--"]
    else:
        # --enable-recovery: mpirun leaves the other ranks running when one dies or ends first
        # (os._exit after its verdict, without MPI_Finalize). Otherwise it tears them down, its
        # SIGTERM a second after the loss, or as soon as another rank ends: the same second in
        # which a survivor's own check notices the lost rank, so a survivor could die before
        # its verdict. Every rank here ends by itself; TIMEOUT_S bounds one that would not.
        launch = [mpiexec, "-np", str(np_), "--enable-recovery"] + sys.argv[4:]
    # Per-rank files: what a rank printed does not depend on the launcher forwarding it.
    _, out, _ = run_rank_files(launch, [sys.executable, script, mode], dict(os.environ),
                               TIMEOUT_S)
    verdicts = results(out)
    took = {int(m.group(1)): float(m.group(2))
            for m in re.finditer(r"^FAULT-TOOK rank (\d+): ([-\d.]+)$", out, re.M)}
    ranks = range(last) if mode == "kill" else range(np_)
    for r in ranks:
        if r not in verdicts:
            fail("rank %d printed no verdict" % r, out)
        kind, message = verdicts[r]
        if kind == "ok":
            fail("rank %d trained on without an error" % r, out)
        if mode in ("shape-drift", "skipped-backward"):
            wanted = ["every rank waits for an operation that cannot complete"]
            if mode == "shape-drift":
                wanted += ["f32[3]", "f32[4]"]
        elif mode == "kill":
            wanted = ["rank %d" % last, "gone"]
        elif mode == "wrong-rank":
            wanted = ["torch.distributed says rank %d of %d, but kolo runs as rank %d of %d"
                      % ((r + 1) % np_, np_, r, np_)]
        else:
            fail("unknown mode " + mode)
        missing = [w for w in wanted if w not in message]
        if missing:
            fail("rank %d's error lacks %s: %s" % (r, missing, message), out)
        if not 0 <= took.get(r, -1) <= BOUND_S:
            fail("rank %d's error came %.2f s after the faulty step (bound %.0f s)"
                 % (r, took.get(r, -1), BOUND_S), out)
    print("PASS %s at %d ranks: %s" % (mode, np_, "; ".join(
        "rank %d after %.2f s" % (r, took[r]) for r in ranks)))


if __name__ == "__main__":
    main()
