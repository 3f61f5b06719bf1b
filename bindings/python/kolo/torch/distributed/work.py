"""torch.distributed's Work objects for kolo's operations, and the thread that completes them.

A Work holds the kolo handles of one collective, the tensors they read and write, and the step
that makes its result (copying a gathered tensor into the caller's outputs...). torch waits on
Works in two ways: ``work.wait()`` from Python, and the Future of ``work.get_future()``, which
DDP's reducer waits on from C++ where no Python code runs. So no Work can wait to be completed
by its own wait(): each process group has one completer thread that waits for its Works in the
order they were issued, runs their result step and completes their Future.

The completer's wait is kolo's (Handle.wait), so while a Work is pending this rank counts as
waiting for its oldest operation. That is what kolo's deadlock check needs, and it is never
wrong: when ranks issue the same collectives in the same order, the oldest pending operation of
the rank that issued fewest has been issued by every rank, so not every rank waits for an
operation a peer lacks unless their sequences truly differ.

A failed Work raises its error from wait() (DistBackendError, RuntimeError on torch 1.13) and
from its Future's value(), as a RuntimeError that carries the same message.
"""

import atexit
import datetime
import queue
import threading
import weakref

import torch
import torch.distributed as dist

from kolo import _kolo as _k

# torch >= 2.1 raises DistBackendError for a backend's failures; torch 1.13 has RuntimeError.
DistBackendError = getattr(dist, "DistBackendError", RuntimeError)


def backend_error(message):
    return DistBackendError(message)


class KoloWork(dist._Work):
    """One collective of a kolo process group (torch.distributed's Work)."""

    def __init__(self, what, handles, keep, finish):
        super().__init__()
        self._what = what          # "allreduce #7 (group 0, ranks 0-2)", for errors
        self._handles = handles    # kolo._kolo.Handle objects
        self._keep = keep          # tensors that must live until the handles complete
        self._finish = finish      # () -> the result (a list of tensors), after success
        self._done = threading.Event()
        self._error = None
        self._result = None
        # torch's Future.set_exception, from Python, completes the Future with the exception
        # object as its value and raises it only when Python unwraps it: C++ (DDP's reducer)
        # would take that object for the result (torch 1.13 then crashes reading a tensor from
        # it). An exception raised in a then() callback is set as a C++ error instead, which
        # value() rethrows wherever it is read. So the Future given out is a continuation.
        self._base = torch.futures.Future()
        self._future = self._base.then(self._unwrap)

    # ---- run by the completer thread --------------------------------------------------------

    def _complete(self):
        error = None
        for h in self._handles:  # every one, even after a failure: they use our tensors
            try:
                h.wait()
            except _k.KoloError as e:
                if error is None:
                    error = e
        if error is None:
            try:
                self._result = self._finish()
            except Exception as e:  # noqa: BLE001 - reported through the Work
                error = e
        self._handles = self._keep = self._finish = None
        if error is not None:
            self._error = backend_error("kolo %s failed: %s" % (self._what, error))
        # The Future first: once wait() returns, the program may exit, and this thread must not
        # be inside torch's C++ (set_result, the continuation) when the interpreter finalises
        # (a daemon thread that then takes the GIL unwinds through C++ and aborts the process).
        self._base.set_result(self._result)
        self._done.set()

    def _unwrap(self, base):
        if self._error is not None:
            raise self._error
        return base.value()

    # ---- torch's Work interface --------------------------------------------------------------

    def wait(self, timeout=None):
        seconds = None
        if isinstance(timeout, datetime.timedelta) and timeout.total_seconds() > 0:
            seconds = timeout.total_seconds()
        if not self._done.wait(seconds):
            raise backend_error("kolo %s: not complete after %.3f s (Work.wait timeout)"
                                % (self._what, seconds))
        if self._error is not None:
            raise self._error
        return True

    # Complete once the Future is: _complete sets it before _done (see there), and a caller whose
    # get_future().wait() has returned must not read False here.
    def is_completed(self):
        return self._done.is_set() or self._base.done()

    def is_success(self):
        return self.is_completed() and self._error is None

    def exception(self):
        return self._error

    def result(self):
        self.wait()
        return self._result

    def get_future(self):
        return self._future

    def source_rank(self):
        raise backend_error("kolo %s: source_rank() is for receives from any source, which kolo "
                            "does not offer" % self._what)


def completed_work(what, result):
    """A Work that is already complete (nothing to communicate)."""
    work = KoloWork(what, [], [], lambda: result)
    work._complete()
    return work


_completers = weakref.WeakSet()


@atexit.register
def _stop_completers():
    """At exit, before the interpreter finalises: each completer finishes the Works it holds
    (kolo's shutdown fails those that cannot complete) and ends, so none is inside kolo's or
    torch's C++ code when daemon threads are stopped (that aborts the process). Bounded: a
    completer still waiting after JOIN_S is left to the interpreter."""
    for completer in list(_completers):
        completer.close()
    for completer in list(_completers):
        completer.join(Completer.JOIN_S)


class Completer(object):
    """One process group's completer thread (see the module's text)."""

    JOIN_S = 5.0

    def __init__(self, name):
        self._queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        _completers.add(self)

    def join(self, timeout):
        self._thread.join(timeout)

    def add(self, work):
        self._queue.put(work)

    def close(self):
        self._queue.put(None)

    def _run(self):
        while True:
            work = self._queue.get()
            if work is None:
                return
            work._complete()
