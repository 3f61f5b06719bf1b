"""The fault scenarios of kolo_fault.c that need Python's hvd.init, driven by run_fault.py under
mpirun. The last rank misbehaves; every other rank prints
  FAULT-RESULT rank <r>: <exception class>: <message>

  missing-at-start   the last rank never calls hvd.init (it sleeps); hvd.init on the others
                     fails after KOLO_START_TIMEOUT naming it. Every rank then waits for the
                     driver to kill the job once it has every survivor's result
  forever            every rank all-reduces until it is ended (the Ctrl-C test); prints
                     READY <pid> once its first all-reduce is done; under mpirun or torchrun
                     (hvd.init finds the rank either way)

Importing torch takes seconds, and not the same on every rank of a loaded machine: the ranks
that call hvd.init first meet at a file barrier in KOLO_FAULT_SYNC_DIR (made by the driver), so
that the start timeout measures the missing rank, not the spread of import times.
"""
import os
import sys
import time


def say(line):
    # One write per line: mpirun interleaves the ranks' output at write boundaries.
    os.write(1, (line + "\n").encode())


def arrived(rank, count):
    """Waits until ranks 0..count-1 have all imported kolo.torch (60 s at most)."""
    folder = os.environ["KOLO_FAULT_SYNC_DIR"]
    open(os.path.join(folder, "rank%d" % rank), "w").close()
    deadline = time.monotonic() + 60
    while len(os.listdir(folder)) < count and time.monotonic() < deadline:
        time.sleep(0.01)


def forever():
    import torch
    import kolo.torch as hvd
    hvd.init()
    x = torch.ones(16)
    hvd.allreduce(x, name="forever")
    say("READY %d" % os.getpid())
    while True:
        hvd.allreduce(x, name="forever")
        time.sleep(0.001)


def main():
    mode = sys.argv[1]
    if mode == "forever":
        forever()
    if mode != "missing-at-start":
        print("unknown mode " + mode, file=sys.stderr)
        return 2
    rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
    size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    if rank == size - 1:
        say("SKIPPING kolo_init on rank %d" % rank)
        time.sleep(300)  # killed by the driver
        return 0
    import kolo.torch as hvd
    arrived(rank, size - 1)
    start = time.monotonic()
    try:
        hvd.init()
    except Exception as e:  # the class is part of what the driver checks
        took = time.monotonic() - start
        say("FAULT-RESULT rank %d: %s: %s\nFAULT-TOOK rank %d: %.2f"
            % (rank, type(e).__name__, e, rank, took))
        time.sleep(300)  # killed by the driver
        return 0
    say("FAULT-RESULT rank %d: OK: hvd.init returned\nFAULT-TOOK rank %d: 0" % (rank, rank))
    time.sleep(300)
    return 1


if __name__ == "__main__":
    sys.exit(main())
