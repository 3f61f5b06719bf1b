"""Runs a job with a timeline and checks the file it leaves (ctest: mpi.timeline_*).

  timeline_run.py --mode complete  --ranks N -- CMD...   the job runs to the end with
      KOLO_TIMELINE and HOROVOD_TIMELINE_MARK_CYCLES=1 (the alias); the timeline must be valid
      JSON with every phase of a fused all-reduce, one ready mark of every rank in every
      negotiation (the steps served from the response cache too), cycle marks, and no span left
      open.
  timeline_run.py --mode interrupt --ranks N -- CMD...   the job gets SIGINT once its timeline
      has grown past --min-bytes (a job running mid-step, HOROVOD_TIMELINE the alias); it must
      die of it, and the timeline must still be valid JSON with every rank's ready mark.

CMD is a kolo-bench model replay, alone (SIGINT reaches the process) or under mpirun (mpirun
takes the SIGINT and terminates the ranks). The checks are tests/python/timeline_check.py's.
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import timeline_check  # noqa: E402


def default_sigint():
    # A shell without job control starts background commands with SIGINT ignored, and the
    # ignoring would survive exec; the job must see SIGINT as a terminal's Ctrl-C does.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("complete", "interrupt"), required=True)
    parser.add_argument("--ranks", type=int, required=True)
    parser.add_argument("--min-bytes", type=int, default=200000)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("cmd", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd

    with tempfile.TemporaryDirectory(prefix="kolo-timeline-") as tmp:
        path = os.path.join(tmp, "timeline.json")
        env = dict(os.environ)
        if args.mode == "complete":
            env["KOLO_TIMELINE"] = path
            env["HOROVOD_TIMELINE_MARK_CYCLES"] = "1"
        else:
            env["HOROVOD_TIMELINE"] = path
        print("+ %s" % " ".join(cmd), flush=True)
        job = subprocess.Popen(cmd, env=env, preexec_fn=default_sigint)
        deadline = time.monotonic() + args.timeout
        try:
            if args.mode == "interrupt":
                while size(path) < args.min_bytes:
                    if job.poll() is not None:
                        print("FAIL: the job ended (exit %s) before it could be interrupted"
                              % job.returncode)
                        return 1
                    if time.monotonic() > deadline:
                        print("FAIL: the timeline did not reach %d bytes in %.0f s"
                              % (args.min_bytes, args.timeout))
                        return 1
                    time.sleep(0.05)
                print("sending SIGINT with the timeline at %d bytes" % size(path),
                      flush=True)
                job.send_signal(signal.SIGINT)
            rc = job.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            job.kill()
            job.wait()
            print("FAIL: the job did not end within %.0f s" % args.timeout)
            return 1
        if args.mode == "complete" and rc != 0:
            print("FAIL: the job exited with %d" % rc)
            return 1
        if args.mode == "interrupt" and rc == 0:
            print("FAIL: the job finished normally; it was meant to be interrupted")
            return 1
        try:
            summary = timeline_check.check(
                timeline_check.load(path), ranks=args.ranks,
                phases=args.mode == "complete", complete=args.mode == "complete",
                cycles=args.mode == "complete", every_step=args.mode == "complete",
                min_events=100)
        except (OSError, timeline_check.TimelineError) as e:
            print("FAIL: %s" % e)
            return 1
        print("OK (%s, exit %d): %d events, %d tensors, collectives %s, ready marks of ranks %s, "
              "%d cycle marks" % (args.mode, rc, summary["events"], summary["tensors"],
                                  summary["collectives"], summary["ready_ranks"],
                                  summary["cycle_marks"]))
        return 0


if __name__ == "__main__":
    sys.exit(main())
