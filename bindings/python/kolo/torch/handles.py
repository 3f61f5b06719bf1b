"""kolo.torch's handles: the int a Horovod asynchronous function returns, the kolo handles
behind it, the tensors they use and the step that makes the result, until ``synchronize``.
Operation names too: Horovod's ``<op>.<name>``, or ``<op>.noname.<n>`` per process set."""

import itertools
import threading

from kolo import _kolo as _k
from kolo.torch.basics import _internal_error



class _Pending(object):
    """One operation between submission and synchronize.

    Kept to one object that Python's cyclic garbage collector tracks in the common case (a
    single kolo handle, nothing else to keep, a tensor as the result), because the collector
    counts every tracked object that outlives a young collection, and once enough have aged it
    walks every object of the process: 35-55 ms under torch, in the middle of a step. A
    model's pending operations live for a whole step, so each object they leave counts
    (docs/benchmarks.md, "What a submission costs, and the collector's pauses")."""
    __slots__ = ("handles", "keep", "finish")

    def __init__(self, handles, keep, finish):
        self.handles = handles  # a kolo._kolo.Handle, or a list of them
        self.keep = keep        # what must live until the operation completes (None: nothing)
        self.finish = finish    # the result (a tensor), or () -> the result, called after
                                # every handle succeeded

    def kolo_handles(self):
        return self.handles if type(self.handles) is list else (self.handles,)

    def result(self):
        return self.finish() if callable(self.finish) else self.finish


_lock = threading.Lock()
_handle_map = {}
_orphans = []  # kolo handles of grouped submissions that failed half-way; dropped at shutdown
_handle_counter = itertools.count(1)
_noname_counters = {}  # process set id -> count of this rank's unnamed operations on it


def _new_handle(prefix, name, process_set_id=0):
    """A fresh int handle and the operation's full name."""
    handle = next(_handle_counter)
    if name is None:
        with _lock:
            counter = _noname_counters.setdefault(process_set_id, itertools.count(1))
            return handle, "%s.noname.%d" % (prefix, next(counter))
    return handle, "%s.%s" % (prefix, name)


def _register(handle, kolo_handles, keep, finish):
    """Enters an operation in the handle map. ``kolo_handles``: one kolo handle, or a list of
    them (a list, no other sequence); ``keep``: what must live until it completes, or None;
    ``finish``: the result, or a function that makes it (see _Pending)."""
    with _lock:
        _handle_map[handle] = _Pending(kolo_handles, keep, finish)
    return handle


def _orphan(kolo_handles, keep):
    # Never drop a submitted operation's handle while it may still run: its destructor would
    # block until completion. Keep it (and its tensors) until it is done or kolo shuts down.
    with _lock:
        _orphans[:] = [o for o in _orphans if not all(h.poll() for h in o[0])]
        if kolo_handles:
            _orphans.append((list(kolo_handles), keep))


def poll(handle):
    """True when the operation of ``handle`` has completed; synchronize() then returns at once.

    Raises ValueError for a handle that was never returned or has been synchronized."""
    with _lock:
        pending = _handle_map.get(handle)
    if pending is None:
        raise ValueError("Handle %r was not created or has been cleared." % (handle,))
    try:
        return all(h.poll() for h in pending.kolo_handles())
    except _k.KoloError:
        # Another thread's synchronize() took the result meanwhile: it has completed.
        return True


def synchronize(handle):
    """Waits for the operation of ``handle`` and returns its output: a tensor, or a tuple of
    tensors for a grouped operation. Returns None for an unknown or already synchronized
    handle, as Horovod does. Raises HorovodInternalError if the operation failed. A signal
    handler's exception (KeyboardInterrupt on Ctrl-C) interrupts the wait promptly; the
    operation goes on and ``handle`` can be synchronized again."""
    with _lock:
        pending = _handle_map.get(handle)
    if pending is None:
        return None
    first_error = None
    for h in pending.kolo_handles():  # wait for all, even after a failure: they use our tensors
        try:
            h.wait()
        except _k.KoloError as e:
            if first_error is None:
                first_error = e
    with _lock:
        if _handle_map.pop(handle, None) is None:
            return None  # another thread synchronized it meanwhile
    if first_error is not None:
        raise _internal_error(first_error) from first_error
    try:
        return pending.result()
    except _k.KoloError as e:
        raise _internal_error(e) from e
