#!/usr/bin/env python3
"""Tier-3 fault tests: runs kolo_fault under mpirun and checks that every survivor gets
the expected error, with its text, within its time bound, and that nothing hangs or is left
behind. Usage: run_fault.py MODE NP KOLO_FAULT MPIEXEC [MPIEXEC_PREFLAGS...]

With kolo.local_launch as MPIEXEC the job starts as torchrun starts it, without MPI (kolo meets
over its TCP rendezvous and runs over UCX); that launcher prefixes each line with "[rank R] ",
which is taken off before the output is checked. A torchrun as MPIEXEC starts it the same way.

Every run has a hard timeout; on expiry the whole process group is killed and the test fails.
"""
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def fail(message, output=""):
    print("FAIL: " + message)
    if output:
        print("---- output ----\n" + output)
    sys.exit(1)


def unprefix(text):
    """The output without kolo.local_launch's "[rank R] " line prefixes."""
    return re.sub(r"^\[rank \d+\] ", "", text, flags=re.M)


def run(cmd, env, timeout):
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        fail(f"{' '.join(cmd)} still running after {timeout} s (a hang)", out)
    return proc.returncode, unprefix(out), time.monotonic() - start


def run_rank_files(launch, rank_cmd, env, timeout):
    """run(), each rank writing its output to a file of its own rather than through the
    launcher: tearing a job down after a loss (or after a rank that ended first), mpirun may
    drop what it has not forwarded yet (a survivor's result, or its SIGTERM notice, seen on a
    loaded machine). The files follow the launcher's output, each under a "---- rankR" line."""
    with tempfile.TemporaryDirectory() as folder:
        wrapped = launch + ["sh", "-c", 'exec "$@" >"$0/rank${OMPI_COMM_WORLD_RANK:-$RANK}" 2>&1',
                            folder] + rank_cmd
        rc, out, took = run(wrapped, env, timeout)
        for name in sorted(os.listdir(folder)):
            with open(os.path.join(folder, name), errors="replace") as f:
                out += "---- " + name + " ----\n" + f.read()
    return rc, out, took


def running(pid):
    """True when pid exists and is not a zombie (a container's init may never reap those)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def read_until(proc, finished, seconds=60):
    """mpirun's output, line by line, until finished(lines) or `seconds` pass or it ends;
    returns the lines and the time taken. The job is left running for the caller to end.
    Reads the pipe's descriptor under select, so a job that prints nothing cannot hold it past
    `seconds`; a partial last line is returned as the last item, for proc.communicate() to go on
    from."""
    lines = []
    pending = b""
    start = time.monotonic()
    fd = proc.stdout.fileno()
    while not finished(lines):
        left = start + seconds - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        pending += chunk
        *complete, pending = pending.split(b"\n")
        lines += [unprefix(l.decode(errors="replace")) + "\n" for l in complete]
    if pending:
        lines.append(unprefix(pending.decode(errors="replace")))
    return lines, time.monotonic() - start


def results(out):
    """rank -> (status, message) of the FAULT-RESULT lines."""
    found = {}
    for m in re.finditer(r"^FAULT-RESULT rank (\d+): (\w+): (.*)$", out, re.M):
        found[int(m.group(1))] = (m.group(2), m.group(3))
    return found


def main():
    mode, np_, binary, mpiexec = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    preflags = sys.argv[5:]
    last = np_ - 1
    env = dict(os.environ)
    # torchrun (a PyPI torch's; scripts/test_torch_versions.sh) starts the job as
    # kolo.local_launch does, for the Ctrl-C test ("forever") with kolo_fault.py.
    torchrun = os.path.basename(mpiexec) == "torchrun"
    env_start = mpiexec == "kolo.local_launch" or torchrun
    if torchrun:
        launch = [mpiexec, "--standalone", "--nproc_per_node", str(np_)]
    elif env_start:
        # Ranks that fail get --grace seconds before the launcher ends the others: time enough
        # for every survivor to report (the bounds below are checked on their own clocks).
        launch = [sys.executable, "-m", mpiexec, "-np", str(np_), "--timeout", "120",
                  "--grace", "10", "--"]
    else:
        launch = [mpiexec, "-np", str(np_)] + preflags
    rank_cmd = [binary, mode]
    if binary.endswith(".py") and not torchrun:
        # kolo_fault.py's scenarios (through hvd.init): run by this interpreter, the one kolo's
        # Python module was built for (torchrun runs it with its own).
        rank_cmd.insert(0, sys.executable)
    elif not binary.endswith(".py") and torchrun:
        rank_cmd.insert(0, "--no-python")
    cmd = launch + rank_cmd

    def end_job(proc):
        """Ends the job and returns the rest of its output: mpirun's ranks die with its process
        group; kolo.local_launch ends its ranks (each in a session of its own) on SIGTERM."""
        if env_start:
            proc.terminate()
            try:
                return proc.communicate(timeout=30)[0]
            except subprocess.TimeoutExpired:
                pass
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.communicate()[0]

    if mode == "stall":
        env.update(KOLO_STALL_CHECK_TIME_SECONDS="1", KOLO_STALL_SHUTDOWN_TIME_SECONDS="2")
        rc, out, took = run(cmd, env, timeout=60)
        if rc != 0:
            fail(f"exit status {rc}", out)
        warning = f"allreduce 'step.x': submitted by rank{'s' if last > 1 else ''} " \
                  f"{'0' if last == 1 else '0,1' if last == 2 else '0-' + str(last - 1)}, " \
                  f"missing ranks: {last}"
        if "tensor(s) submitted by some ranks but not by others for over 1 s" not in out or \
                warning not in out:
            fail(f"rank 0 did not warn: expected '{warning}'", out)
        got = results(out)
        for r in range(last):
            status, message = got.get(r, ("(none)", ""))
            if status != "DEADLINE_EXCEEDED" or warning not in message or \
                    "KOLO_STALL_SHUTDOWN_TIME_SECONDS=2" not in message:
                fail(f"rank {r}: expected DEADLINE_EXCEEDED with '{warning}', got {status}: "
                     f"{message}", out)
        if took > 30:
            fail(f"took {took:.1f} s", out)
    elif mode == "early-shutdown":
        rc, out, took = run(cmd, env, timeout=60)
        if rc != 0:
            fail(f"exit status {rc}", out)
        got = results(out)
        for r in range(last):
            status, message = got.get(r, ("(none)", ""))
            if status != "FAILED_PRECONDITION" or f"rank {last} shut down" not in message:
                fail(f"rank {r}: expected FAILED_PRECONDITION '... rank {last} shut down', got "
                     f"{status}: {message}", out)
        if took > 30:
            fail(f"took {took:.1f} s", out)
    elif mode in ("kill", "exit"):
        rc, out, took = run_rank_files(launch, rank_cmd, env, timeout=90)
        if rc == 0:
            fail("mpirun exited 0 although a rank died", out)
        # Each survivor either noticed the loss itself (its operation failed with UNAVAILABLE
        # naming the lost rank) or was torn down by mpirun and said which rank was gone first.
        got = results(out)
        for r in range(last):
            status, message = got.get(r, ("(none)", ""))
            noticed = status == "UNAVAILABLE" and f"rank {last} (pid " in message and \
                "is gone" in message
            notice = re.search(rf"^kolo: rank {r}/{np_} \(pid \d+ on [^)]*\) terminated by "
                               rf"SIGTERM.*gone on this host: (rank \d+ \(pid \d+\), )*"
                               rf"rank {last} \(pid \d+\)", out, re.M)
            if not noticed and not notice:
                fail(f"rank {r} did not name the lost rank {last}", out)
        if took > 30:
            fail(f"survivors took {took:.1f} s to end (bound 30 s)", out)
    elif mode == "freeze":
        # The last rank stops itself mid-transfer: each survivor warns (check time 1 s) naming
        # the rank it waits for, then fails with DEADLINE_EXCEEDED (shutdown time 3 s); kolo
        # stops, so its next operation fails at once (FAILED_PRECONDITION) with the same reason.
        # Then the stopped rank is killed.
        env.update(KOLO_STALL_CHECK_TIME_SECONDS="1", KOLO_STALL_SHUTDOWN_TIME_SECONDS="3")
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        lines, took = read_until(
            proc, lambda lines: sum(l.startswith("FAULT-DONE") for l in lines) >= last)
        done = sum(l.startswith("FAULT-DONE") for l in lines)
        frozen = next((int(m.group(1)) for m in map(lambda l: re.match(r"FROZEN (\d+)", l), lines)
                       if m), None)
        if frozen is not None:
            try:
                os.kill(frozen, signal.SIGKILL)  # SIGTERM stays pending in a stopped process
            except ProcessLookupError:
                pass
        rest = unprefix(end_job(proc))  # the survivors wait to be killed
        out = "".join(lines) + rest
        if frozen is None:
            fail("the last rank never froze", out)
        if done < last:
            fail(f"only {done} of {last} survivors ended within 60 s (a hang)", out)
        # Each survivor warns naming the stopped rank: the peer watch sees its state on this
        # host ("stopped on this host: rank N"), whichever transfer or negotiation waits.
        for r in range(last):
            m = re.search(rf"rank {r}: no progress for [0-9.]+ s waiting for .*stopped on this "
                          rf"host: rank {last} \(pid \d+, stopped by a signal\).*"
                          rf"KOLO_STALL_CHECK_TIME_SECONDS=1", out)
            if not m:
                fail(f"rank {r} did not warn naming the stopped rank {last}", out)
            found = re.findall(rf"^FAULT-RESULT rank {r}: (\w+): (.*)$", out, re.M)
            want = ["DEADLINE_EXCEEDED", "FAILED_PRECONDITION"]
            if [s for s, _ in found] != want or any(
                    "waiting for" not in m or "KOLO_STALL_SHUTDOWN_TIME_SECONDS=3" not in m
                    for _, m in found):
                fail(f"rank {r}: expected {want} naming the wait, got {found}", out)
        for r in range(last):
            if not re.search(rf"^FAULT-DONE rank {r}: 0$", out, re.M):
                fail(f"rank {r}: its next operation did not fail at once as expected", out)
        if took > 30:
            fail(f"survivors took {took:.1f} s to end (bound 30 s)", out)
    elif mode in ("missing-at-start", "missing-after-mpi", "wrong-port"):
        # The last rank never calls kolo_init (or hvd.init): every other rank's fails after the
        # start timeout naming it. Every rank then waits; the job is killed here once every
        # survivor has reported (a survivor that exited would make mpirun kill the others,
        # perhaps before they printed).
        # Through Python the ranks that call hvd.init meet first at a file barrier, after
        # importing torch (see kolo_fault.py), so the same timeout serves both.
        # wrong-port (started without MPI): the last rank does call kolo_init, with a
        # MASTER_PORT where nothing listens, and fails naming that address; the others fail as
        # if it never came.
        limit = 2
        wrong = mode == "wrong-port"
        env.update(KOLO_START_TIMEOUT=str(limit),
                   KOLO_FAULT_SYNC_DIR=tempfile.mkdtemp(prefix="kolo-fault-"))
        if wrong:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                probe.bind(("127.0.0.1", 0))
                env["KOLO_FAULT_WRONG_PORT"] = str(probe.getsockname()[1])
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        def reported_ranks(lines):
            return {int(m.group(1)) for m in map(lambda l: re.match(r"FAULT-TOOK rank (\d+):", l),
                                                  lines) if m}

        # The window covers the launcher's start and, through Python, importing torch: tens of
        # seconds on a loaded machine. The bound that matters is FAULT-TOOK, checked below.
        reporting = np_ if wrong else last
        lines, took = read_until(proc, lambda lines: len(reported_ranks(lines)) >= reporting,
                                 seconds=100)
        reported = reported_ranks(lines)
        # SIGTERM to the launcher, which ends every rank (they are not in its process group).
        proc.terminate()
        try:
            rest, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rest, _ = proc.communicate()
            fail("the launcher still running 30 s after SIGTERM", "".join(lines) + rest)
        finally:
            shutil.rmtree(env["KOLO_FAULT_SYNC_DIR"], ignore_errors=True)
        out = "".join(lines) + unprefix(rest)
        if len(reported) < reporting:
            fail(f"only ranks {sorted(reported)} of 0-{reporting - 1} reported within 100 s", out)
        if not wrong and f"SKIPPING kolo_init on rank {last}" not in out:
            fail("the last rank did not skip kolo_init", out)
        got = results(out)
        status_wanted = "HorovodInternalError" if binary.endswith(".py") else "DEADLINE_EXCEEDED"
        if env_start:
            # The rendezvous's rank 0 names who never came; the others relay its verdict.
            want = (f"rank(s) [{last}] did not arrive within {limit} s (KOLO_START_TIMEOUT)")
        else:
            arrived = "0" if last == 1 else "0,1" if last == 2 else f"0-{last - 1}"
            want = (f"kolo_init: rank {last} has not called kolo_init within {limit} s "
                    f"(KOLO_START_TIMEOUT={limit}); rank{'s' if last > 1 else ''} {arrived} "
                    f"ha{'ve' if last > 1 else 's'} (of {np_} started by the launcher)")
        wants = {r: want for r in range(last)}
        if wrong:
            wants[last] = (f"rank {last} found no rank 0 at 127.0.0.1:"
                           f"{env['KOLO_FAULT_WRONG_PORT']} within {limit} s")
        for r, text in wants.items():
            status, message = got.get(r, ("(none)", ""))
            if status != status_wanted or text not in message:
                fail(f"rank {r}: expected {status_wanted} '{text}', got {status}: {message}",
                     out)
            m = re.search(rf"^FAULT-TOOK rank {r}: ([0-9.]+)$", out, re.M)
            if not m or not limit - 3 <= float(m.group(1)) <= limit + 8:
                fail(f"rank {r}: kolo_init should fail about {limit} s in, took "
                     f"{m.group(1) if m else '?'} s", out)
    elif mode == "forever":
        # Ctrl-C on the launcher: every rank ends, none is left behind. kolo.local_launch, as
        # torchrun, sends each rank SIGTERM and SIGKILL only after its grace (10 s): a rank
        # that SIGTERM does not end makes it take that long.
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        pids = []
        deadline = time.monotonic() + 60
        while len(pids) < np_ and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            m = re.match(r"READY (\d+)", unprefix(line))
            if m:
                pids.append(int(m.group(1)))
        if len(pids) < np_:
            os.killpg(proc.pid, signal.SIGKILL)
            fail(f"only {len(pids)} of {np_} ranks started")
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        interrupted = time.monotonic()
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            fail("the launcher still running 30 s after SIGINT")
        ended = time.monotonic() - interrupted
        if env_start and ended > 8:
            fail(f"the ranks took {ended:.1f} s to end after SIGINT: SIGTERM did not end them")
        time.sleep(0.5)
        alive = [p for p in pids if running(p)]
        if alive:
            for p in alive:
                os.kill(p, signal.SIGKILL)
            fail(f"ranks left behind after Ctrl-C: pids {alive}")
    else:
        fail("unknown mode " + mode)
    print(f"PASS {mode} at {np_} ranks")


if __name__ == "__main__":
    main()
