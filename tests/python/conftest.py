# pytest under mpirun for kolo.torch (tier 2, see docs/architecture.md).
#
# Every rank runs this same suite:
#   - kolo.torch is initialised once per process (pytest_configure) and shut down at the end
#     (pytest_unconfigure);
#   - all ranks must collect the same tests in the same order: checked once after collection and
#     again after every test (the node id travels with each test's outcome);
#   - after every test the ranks exchange their outcomes, so a test that failed on any rank fails
#     on every rank with that rank's message; with -x all ranks then stop at the same test and
#     shut down together, and pytest exits non-zero on every rank, so mpirun fails;
#   - a watchdog ends a rank whose test (setup, call, teardown) runs longer than
#     KOLO_PYTEST_TIMEOUT_S seconds (default 60): it names the test, dumps every thread's stack to
#     stderr and calls os._exit(1). faulthandler's own C watchdog backs it up a little later, in
#     case the test holds the GIL and the Python watchdog thread can't run;
#   - rank 0 prints as usual; the other ranks print only failures (and rank-prefixed watchdog
#     messages).
import faulthandler
import hashlib
import json
import os
import threading
import time

import pytest
import torch

import kolo.torch as hvd

TEST_TIMEOUT_S = float(os.environ.get("KOLO_PYTEST_TIMEOUT_S", "60"))
# faulthandler's C-level watchdog fires this much after the Python one.
_C_WATCHDOG_GRACE_S = 15.0
# Bytes per rank in the outcome exchange (node id, outcome, start of the failure message).
_OUTCOME_BYTES = 4096

_state = {"rank": None, "size": None, "stderr": None, "watchdog": None, "failures": None}


def _rank_prefix():
    return "[rank %s/%s] " % (_state["rank"], _state["size"])


class _Watchdog:
    """Ends the process when a test runs past its deadline; armed per test."""

    def __init__(self, stream):
        self._stream = stream
        self._cond = threading.Condition()
        self._deadline = None
        self._what = None
        self._seconds = None
        thread = threading.Thread(target=self._run, name="kolo-pytest-watchdog", daemon=True)
        thread.start()

    def arm(self, what, seconds):
        with self._cond:
            self._what, self._seconds = what, seconds
            self._deadline = time.monotonic() + seconds
            self._cond.notify()
        faulthandler.dump_traceback_later(seconds + _C_WATCHDOG_GRACE_S, exit=True,
                                          file=self._stream)

    def disarm(self):
        faulthandler.cancel_dump_traceback_later()
        with self._cond:
            self._deadline = None
            self._cond.notify()

    def _run(self):
        with self._cond:
            while True:
                if self._deadline is None:
                    self._cond.wait()
                    continue
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                try:
                    self._stream.write(
                        "\n%s%s still running after %.0f s: the test is hung (a peer rank may "
                        "have failed or stopped submitting); every thread's stack follows, then "
                        "this rank exits with status 1\n" % (_rank_prefix(), self._what,
                                                             self._seconds))
                    failures = _state.get("failures") or []
                    if failures:
                        # Often the cause: this rank failed and moved on while a peer still
                        # waits in the test's collective (or the reverse).
                        self._stream.write("%sthis test had already failed here:\n%s\n" % (
                            _rank_prefix(), "\n".join(failures)))
                    self._stream.flush()
                    faulthandler.dump_traceback(file=self._stream, all_threads=True)
                    self._stream.flush()
                finally:
                    os._exit(1)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    # Small tensors only: one intra-op thread per rank, since ranks share 2 cores.
    torch.set_num_threads(1)
    hvd.init()
    _state["rank"], _state["size"] = hvd.rank(), hvd.size()
    # Global capture is suspended during configure, so fd 2 is the real stderr here; the watchdog
    # writes to a copy of it so that its message survives the test's output capture.
    _state["stderr"] = os.fdopen(os.dup(2), "w", buffering=1)
    _state["watchdog"] = _Watchdog(_state["stderr"])
    if _state["rank"] != 0:
        # Before the terminal reporter is created (this hook runs first): quieter, no warnings
        # summary. The rest (no progress letters) is done in pytest_report_teststatus.
        config.option.verbose = min(config.option.verbose, 0) - 1
        config.option.disable_warnings = True


def pytest_sessionstart(session):
    if _state["rank"] not in (None, 0):
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and hasattr(reporter, "_show_progress_info"):
            reporter._show_progress_info = False  # no "[ 42%]" column on ranks other than 0


def pytest_unconfigure(config):
    if _state["watchdog"] is not None:
        # Shutdown waits for the other ranks' background threads; don't let it hang CI.
        _state["watchdog"].arm("kolo.torch.shutdown()", TEST_TIMEOUT_S)
    try:
        if hvd.is_initialized():
            hvd.shutdown()
    finally:
        if _state["watchdog"] is not None:
            _state["watchdog"].disarm()


def pytest_report_teststatus(report, config):
    # Ranks other than 0 print nothing for a passing test (no dots interleaved with rank 0's).
    if _state["rank"] not in (None, 0) and report.passed and report.when == "call":
        return "passed", "", ""
    return None


def _allgather_bytes(payload, name):
    """Every rank's `payload` (bytes, at most _OUTCOME_BYTES) in rank order."""
    buf = torch.zeros(1, _OUTCOME_BYTES + 4, dtype=torch.uint8)
    data = payload[:_OUTCOME_BYTES]
    buf[0, :4] = torch.tensor(list(len(data).to_bytes(4, "little")), dtype=torch.uint8)
    if data:
        buf[0, 4:4 + len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    rows = hvd.allgather(buf, name=name)
    out = []
    for r in range(rows.shape[0]):
        row = bytes(rows[r].tolist())
        n = int.from_bytes(row[:4], "little")
        out.append(row[4:4 + n])
    return out


def pytest_collection_finish(session):
    ids = [item.nodeid for item in session.items]
    payload = json.dumps({"count": len(ids), "ids": ids}).encode()
    digest = hashlib.sha256(payload).hexdigest().encode()
    digests = _allgather_bytes(digest, "kolo.pytest.collection")
    differing = [r for r, d in enumerate(digests) if d != digests[0]]
    if differing:
        raise pytest.UsageError(
            "ranks collected different tests (rank 0 differs from ranks %s): every rank must run "
            "the same tests in the same order" % differing)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    watchdog = _state["watchdog"]
    if watchdog is not None:
        watchdog.arm("test %s" % item.nodeid, TEST_TIMEOUT_S)
    try:
        yield
    finally:
        if watchdog is not None:
            watchdog.disarm()


def _short_failure(report):
    text = getattr(report, "longreprtext", "") or str(report.longrepr)
    lines = [line for line in text.splitlines() if line.strip()]
    # The end of a traceback carries the assertion / exception; keep that.
    tail = "\n".join(lines[-25:])
    return "%s failed in %s:\n%s" % (_rank_prefix().strip(), report.when, tail)


def _encode_outcome(nodeid, failure):
    """JSON of one rank's outcome, the failure message cut from the front to fit."""
    msg = failure or ""
    while True:
        data = json.dumps({"id": nodeid, "failed": failure is not None, "msg": msg}).encode()
        if len(data) <= _OUTCOME_BYTES or not msg:
            return data
        msg = "..." + msg[len(msg) // 4 + 3:]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    failures = item.__dict__.setdefault("_kolo_failures", [])
    _state["failures"] = failures  # for the watchdog's message
    if report.failed:
        failures.append(_short_failure(report))
    if call.when != "teardown":
        return
    # Every rank, every test: exchange outcomes so that all ranks agree on pass/fail.
    mine = _encode_outcome(item.nodeid, "\n".join(failures) if failures else None)
    try:
        theirs = [json.loads(b.decode()) for b in _allgather_bytes(mine, "kolo.pytest.outcome")]
    except Exception as e:  # the runtime itself is broken: this rank can't know the others'
        if not failures:
            report.outcome = "failed"
            report.longrepr = ("%scould not exchange test outcomes with the other ranks: %s: %s"
                               % (_rank_prefix(), type(e).__name__, e))
        item.session.shouldstop = "kolo runtime unusable after %s" % item.nodeid
        return
    problems, culprits = [], []
    for r, other in enumerate(theirs):
        if other["id"] != item.nodeid:
            problems.append("rank %d ran %s at the same point: the ranks' test orders differ"
                            % (r, other["id"]))
            culprits.append(r)
        elif other["failed"] and r != _state["rank"]:
            problems.append(other["msg"])
            culprits.append(r)
    if problems and not failures:
        report.outcome = "failed"
        if _state["rank"] == 0:
            # Rank 0 prints the other ranks' failures in full.
            report.longrepr = ("%s passed here but failed on another rank:\n\n" % item.nodeid
                               + "\n\n".join(problems))
        else:
            report.longrepr = ("%s%s passed here but failed on rank(s) %s (shown by rank 0)"
                               % (_rank_prefix(), item.nodeid, culprits))
