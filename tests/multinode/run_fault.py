#!/usr/bin/env python3
"""Faults across the nodes of scripts/netns_cluster.sh: kolo_fault under mpirun on NODES nodes
of RANKS ranks each, and every rank that can still speak must report the failure in bounded
time. Usage: run_fault.py MODE NODES RANKS KOLO_FAULT NETNS_CLUSTER

  kill  the last rank (on the last node) SIGKILLs itself in the middle of a 16 MiB all-reduce;
        every other rank must end within 30 s, each having named the lost rank (kolo's error
        UNAVAILABLE "rank R (pid P) is gone", from a peer on its node) or having been torn down
        by mpirun (kolo's SIGTERM notice), and mpirun must exit non-zero.
  cut   while every rank all-reduces in a loop, the last node's link goes down (`ip link set
        eth0 down` in its namespace): nothing can cross it again, no process died and no
        connection is reset, so no launcher or socket reports anything. Every rank, on both
        sides of the cut, must fail its all-reduce within 15 s (KOLO_STALL_SHUTDOWN_TIME_SECONDS
        =3: kolo's progress watch) with DEADLINE_EXCEEDED naming the ranks it waits for (or
        UNAVAILABLE naming a peer of its node that gave up first).

Each rank writes its output to a file of its own (mpirun cannot forward a cut-off node's
output), and how it ended to another (see WRAPPER): a survivor that died of a signal of its own,
such as SIGPIPE from a dead peer's reset connection, shows as such. The cluster is removed at
the end, by netns_cluster.sh, on any outcome. Exits 77 when namespaces cannot be made here
(ctest: skipped, with the reason)."""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

CUT_BOUND_S = 15.0
KILL_BOUND_S = 30.0
# Each rank's output to a file of its own, and how the rank ended to another ("exit N", or
# "signal N" as the shell reports a signal: 128 + N). The shell is the launcher's child and
# shares the rank's process group, which is what Open MPI signals at a teardown: its trap
# keeps it alive through the SIGTERM until the rank has ended (a trap set to a command is not
# inherited, so the rank gets the signal as it would without the shell). A SIGKILL to the
# group ends both, and then no status is written: "no status" says the launcher killed it (or,
# in cut mode, that the rank still runs). A rank that died of a signal (status 129-192): the
# shell dies of the same one, for the launcher, without a core dump of its own that could
# replace the rank's.
WRAPPER = ('trap : TERM; "$@" >"$0/rank$OMPI_COMM_WORLD_RANK" 2>&1; s=$?; '
           'echo "$s" >"$0/status$OMPI_COMM_WORLD_RANK"; '
           'if [ "$s" -gt 128 ] && [ "$s" -le 192 ]; then '
           'trap - TERM; ulimit -c 0; kill -$((s - 128)) $$; fi; exit $s')


def how_ended(outputs, rank):
    status = outputs.get("status%d" % rank, "").strip()
    if not status:
        return "no status (killed with its shell, or still running)"
    code = int(status)
    return "signal %d" % (code - 128) if 128 < code <= 192 else "exit %d" % code


def fail(message, outputs=None):
    print("FAIL: " + message)
    for name, text in sorted((outputs or {}).items()):
        print("---- %s ----\n%s" % (name, text))
    sys.exit(1)


def read_outputs(folder):
    out = {}
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), errors="replace") as f:
            out[name] = f.read()
    return out


def results(text):
    m = re.search(r"^FAULT-RESULT rank (\d+): (\w+): (.*)$", text, re.M)
    return (m.group(2), m.group(3)) if m else ("(none)", "")


def main():
    mode, nodes, ranks, binary, cluster = sys.argv[1:6]
    check = subprocess.run([cluster, "check"], stderr=subprocess.PIPE, text=True)
    if check.returncode != 0:
        print("SKIPPED: " + check.stderr.strip())
        sys.exit(77)
    counts = [int(c) for c in ranks.split("+")] if "+" in ranks else [int(ranks)] * int(nodes)
    size = sum(counts)
    last = size - 1
    name = "kf%d" % (os.getpid() % 100000)
    env = dict(os.environ, KOLO_STALL_CHECK_TIME_SECONDS="1",
               KOLO_STALL_SHUTDOWN_TIME_SECONDS="3")
    with tempfile.TemporaryDirectory() as folder:
        cmd = [cluster, "--name", name, "run", nodes, ranks, "--timeout", "120", "--",
               "sh", "-c", WRAPPER, folder, binary, "kill" if mode == "kill" else "cut"]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        try:
            if mode == "kill":
                start = time.monotonic()
                try:
                    launcher, _ = proc.communicate(timeout=90)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGTERM)
                    launcher, _ = proc.communicate()
                    fail("still running 90 s after the start (a hang)", read_outputs(folder))
                took = time.monotonic() - start
                outputs = read_outputs(folder)
                outputs["launcher"] = launcher
                if proc.returncode == 0:
                    fail("mpirun exited 0 although a rank died", outputs)
                for r in range(last):
                    text = outputs.get("rank%d" % r, "")
                    status, message = results(text)
                    noticed = status == "UNAVAILABLE" and "rank %d (pid " % last in message
                    torn_down = re.search(r"^kolo: rank %d/%d \(pid \d+ on [^)]*\) terminated by "
                                          r"SIGTERM" % (r, size), text, re.M)
                    if not noticed and not torn_down:
                        fail("rank %d neither named the lost rank %d nor was torn down (%s)"
                             % (r, last, how_ended(outputs, r)), outputs)
                if took > KILL_BOUND_S:
                    fail("the job took %.1f s to end (bound %.0f s)" % (took, KILL_BOUND_S),
                         outputs)
                print("PASSED: %s, %s ranks on %s nodes: mpirun exited %d after %.1f s"
                      % (mode, ranks, nodes, proc.returncode, took))
                for r in range(last):
                    text = outputs.get("rank%d" % r, "")
                    told = [l for l in text.splitlines()
                            if l.startswith("FAULT-RESULT") or "terminated by SIGTERM" in l]
                    print("rank %d: %s; %s" % (r, " / ".join(told), how_ended(outputs, r)))
                return
            # cut: wait until every rank runs its loop, then cut the last node's link.
            deadline = time.monotonic() + 60
            while sum("READY" in t for t in read_outputs(folder).values()) < size:
                if proc.poll() is not None or time.monotonic() > deadline:
                    fail("not every rank started its loop", read_outputs(folder))
                time.sleep(0.1)
            time.sleep(0.5)
            node = "%s-n%d" % (name, len(counts) - 1)
            subprocess.run(["ip", "-n", node, "link", "set", "eth0", "down"], check=True)
            cut_at = time.monotonic()
            while time.monotonic() - cut_at < CUT_BOUND_S + 5:
                if sum("FAULT-DONE" in t for t in read_outputs(folder).values()) == size:
                    break
                time.sleep(0.1)
            took = time.monotonic() - cut_at
            outputs = read_outputs(folder)
            for r in range(size):
                text = outputs.get("rank%d" % r, "")
                status, message = results(text)
                # The progress watch's DEADLINE_EXCEEDED naming the ranks waited for, or, on a
                # rank whose node-local peer gave up first, UNAVAILABLE naming that peer.
                if status not in ("DEADLINE_EXCEEDED", "UNAVAILABLE") or \
                        not re.search(r"rank \d", message):
                    fail("rank %d: expected DEADLINE_EXCEEDED or UNAVAILABLE naming a rank, got "
                         "%s: %s" % (r, status, message), outputs)
            if took > CUT_BOUND_S:
                fail("the ranks took %.1f s after the cut to report (bound %.0f s)"
                     % (took, CUT_BOUND_S), outputs)
            print("PASSED: %s, %s ranks on %s nodes: every rank failed within %.1f s of the cut"
                  % (mode, ranks, nodes, took))
            for r in range(size):
                print("rank %d: %s; %s" % (r, ": ".join(results(outputs["rank%d" % r])),
                                           how_ended(outputs, r)))
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)  # netns_cluster.sh removes the cluster
                try:
                    proc.communicate(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.communicate()
                    subprocess.run([cluster, "--name", name, "down"])


if __name__ == "__main__":
    main()
