"""Starts a job's ranks on this host the way torchrun does, without MPI: each process gets RANK,
LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR and MASTER_PORT, and no MPI
launcher's variables, so kolo starts over its TCP rendezvous and UCX (runtime/world/
env_bootstrap.h). ``kolorun --gloo`` launches with it; so do the tests of that start.

    python -m kolo.local_launch -np N [--timeout S] [--grace S] -- COMMAND [ARGS...]

MASTER_ADDR and MASTER_PORT are the environment's when it sets them, else 127.0.0.1 and a free
port. As under torchrun, MASTER_PORT is left to torch's store (``init_process_group``, whose
TCPStore rank 0 serves there): kolo's rendezvous gets a port of its own, KOLO_MASTER_PORT (the
environment's, else another free port). KOLO_JOB_ID, kolo's rendezvous token, is a fresh one
unless the environment sets it, so a rank of another job on the same port is refused instead
of joined.

Each rank's output comes through as it comes, every line prefixed with "[rank R] ". The exit
status is the first non-zero one of a rank, after the others had --grace seconds to report the
loss and end (then SIGTERM, and SIGKILL after another --grace); 124 when the job outlives
--timeout; else 0. The first rank that fails is named on standard error, with how it ended
("rank 1 (pid 4242) was killed by SIGKILL"). SIGTERM, SIGHUP or Ctrl-C here ends the ranks the
same way: each runs in a session of its own, as under torchrun, and would otherwise outlive this
process.
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

# The variables of an MPI launcher: a rank that has them would take the MPI start.
_MPI_PREFIXES = ("OMPI_", "PMI_", "PMIX_", "MPI_LOCAL")


def free_port(address="127.0.0.1"):
    """A TCP port free on `address` a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((address, 0))
        return s.getsockname()[1]


def rank_environments(np_, environ):
    """The environment of each of `np_` ranks, from the launcher's `environ`."""
    base = {k: v for k, v in environ.items() if not k.startswith(_MPI_PREFIXES)}
    base.setdefault("MASTER_ADDR", "127.0.0.1")
    if not base.get("MASTER_PORT"):
        base["MASTER_PORT"] = str(free_port())
    while not base.get("KOLO_MASTER_PORT") or base["KOLO_MASTER_PORT"] == base["MASTER_PORT"]:
        base["KOLO_MASTER_PORT"] = str(free_port())
    if not base.get("KOLO_JOB_ID"):
        base["KOLO_JOB_ID"] = "kolo-local-" + uuid.uuid4().hex[:12]
    base.update(WORLD_SIZE=str(np_), LOCAL_WORLD_SIZE=str(np_), GROUP_RANK="0")
    return [dict(base, RANK=str(r), LOCAL_RANK=str(r)) for r in range(np_)]


def _pump(stream, rank, out):
    for line in iter(stream.readline, b""):
        out.buffer.write(b"[rank %d] " % rank + line)
        out.flush()


def _how_it_ended(returncode):
    """"exited with status 3", "was killed by SIGKILL": a failed rank's end, for the message."""
    if returncode >= 0:
        return "exited with status %d" % returncode
    try:
        return "was killed by %s" % signal.Signals(-returncode).name
    except ValueError:
        return "was killed by signal %d" % -returncode


def run(np_, command, environ=None, timeout=None, grace=5.0):
    """Runs `command` as `np_` ranks; returns the job's exit status (see the module's text)."""
    envs = rank_environments(np_, dict(os.environ if environ is None else environ))
    procs, pumps = [], []

    def end_all():
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5)):
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, sig)
            until = time.monotonic() + wait
            while time.monotonic() < until and any(p.poll() is None for p in procs):
                time.sleep(0.05)

    def terminated(signum, frame):
        raise SystemExit(128 + signum)

    # SIGTERM and SIGHUP (kolorun passes both on) end the job through end_all below: the ranks
    # run in sessions of their own, which nothing else signals.
    stops = (signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, terminated) for s in stops}
    status = 0
    try:
        for rank, env in enumerate(envs):
            p = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, start_new_session=True)
            procs.append(p)
            for stream, out in ((p.stdout, sys.stdout), (p.stderr, sys.stderr)):
                t = threading.Thread(target=_pump, args=(stream, rank, out), daemon=True)
                t.start()
                pumps.append(t)
        deadline = None if timeout is None else time.monotonic() + timeout
        while any(p.poll() is None for p in procs):
            failed = [p for p in procs if p.poll() not in (None, 0)]
            if failed:
                status = failed[0].returncode
                print("kolo.local_launch: rank %d (pid %d) %s; ending the job"
                      % (procs.index(failed[0]), failed[0].pid, _how_it_ended(status)),
                      file=sys.stderr)
                # The others get the grace period to report the loss themselves (and to end).
                until = time.monotonic() + grace
                while time.monotonic() < until and any(p.poll() is None for p in procs):
                    time.sleep(0.05)
                break
            if deadline is not None and time.monotonic() > deadline:
                print("kolo.local_launch: the job outlived --timeout %g s" % timeout,
                      file=sys.stderr)
                status = 124
                break
            time.sleep(0.05)
    except KeyboardInterrupt:
        status = 130
    finally:
        # A second stop (a process group's SIGTERM arriving beside kolorun's) must not cut the
        # ranks' ending short.
        for s in stops:
            signal.signal(s, signal.SIG_IGN)
        end_all()
        for t in pumps:
            t.join(timeout=5)
        for s, handler in previous.items():
            signal.signal(s, handler)
    if status == 0:
        status = next((p.returncode for p in procs if p.returncode != 0), 0)
    return 1 if status < 0 else status


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m kolo.local_launch",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("-np", type=int, required=True, help="number of ranks")
    parser.add_argument("--timeout", type=float, help="end the job after this many seconds")
    parser.add_argument("--grace", type=float, default=5.0,
                        help="seconds the ranks get to end after one failed (default 5)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.np < 1 or not command:
        parser.error("give -np N (at least 1) and a command after --")
    return run(args.np, command, timeout=args.timeout, grace=args.grace)


if __name__ == "__main__":
    sys.exit(main())
