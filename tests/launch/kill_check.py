#!/usr/bin/env python3
"""A rank SIGKILLed in the middle of training, in a job started without MPI
(kolo.local_launch): every survivor must fail within a few seconds with an error that
names the lost rank, never hang.

    kill_check.py NP            runs the job through kolo.local_launch and checks its output
    kill_check.py --worker      one rank of it (all-reduces until the last rank kills itself)
"""
import os
import re
import signal
import subprocess
import sys
import time

BOUND_S = 5.0


def worker():
    import torch
    import kolo.torch as hvd
    hvd.init()
    last = hvd.size() - 1
    started = None
    try:
        for step in range(1000000):
            if step == 50:
                if hvd.rank() == last:
                    os.kill(os.getpid(), signal.SIGKILL)
                started = time.monotonic()
            hvd.allreduce(torch.ones(1000), name="step.%d" % step)
    except Exception as e:  # kolo's error, whatever its class
        print("KILL-CHECK rank %d after %.2f s: %s" % (hvd.rank(), time.monotonic() - started, e),
              flush=True)
        return 0
    print("KILL-CHECK rank %d: no error" % hvd.rank(), flush=True)
    return 1


def main():
    if sys.argv[1:] == ["--worker"]:
        return worker()
    np_ = int(sys.argv[1])
    cmd = [sys.executable, "-m", "kolo.local_launch", "-np", str(np_), "--timeout", "60",
           "--grace", "4", "--", sys.executable, os.path.abspath(__file__), "--worker"]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=120).stdout
    last = np_ - 1
    ok = True
    for r in range(last):
        m = re.search(r"^\[rank %d\] KILL-CHECK rank %d after ([0-9.]+) s: (.*)$" % (r, r), out,
                      re.M)
        if m is None or float(m.group(1)) > BOUND_S or \
                not re.search(r"rank %d \(pid \d+ on [^)]*\) is gone" % last, m.group(2)):
            print("FAIL: rank %d did not report the loss of rank %d within %g s" % (r, last,
                                                                                 BOUND_S))
            ok = False
    if not ok:
        print("---- output ----\n" + out)
        return 1
    print("PASS: every survivor of %d named rank %d within %g s" % (np_, last, BOUND_S))
    return 0


if __name__ == "__main__":
    sys.exit(main())
