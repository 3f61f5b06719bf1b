"""Horovod's process sets (horovod.common.process_sets) over kolo's C API.

A process set is a subset of the ranks with a negotiation and data path of its own: operations
on it (``process_set=`` of every collective) involve its members only, never wait for the other
ranks, and may run while the other ranks do something else. ``global_process_set`` (id 0) is
every rank. ``add_process_set`` and ``remove_process_set`` are collective over every rank of the
job, members or not, each passing the same ranks; ``init(process_sets=[...])`` adds sets at
start-up. As in Horovod:
- inside a set, the rank of a member is its index in the set's ascending ``ranks``
  (``ProcessSet.rank()``): an allgather concatenates in that order, rank r of the set gets the
  r-th share of a reducescatter, ``splits`` of an alltoall have one entry per member in that
  order, and Average divides by the set's size;
- but ``root_rank`` of a broadcast stays a global rank (``hvd.rank()``), which must be a member.
A non-member that calls an operation on a set gets a ValueError (an InvalidSubmissionError).
"""

import warnings

from kolo import _kolo as _k
from kolo.torch import basics as _basics


class ProcessSet(object):
    """A set of ranks that run collective operations together (Horovod's ``hvd.ProcessSet``).

    Made from a list of global ranks (any order; kept ascending), then registered by
    ``hvd.add_process_set`` or ``hvd.init(process_sets=[...])``, which set ``process_set_id``.
    Until then, and after ``hvd.remove_process_set`` or ``hvd.shutdown``, ``process_set_id``
    is None and ``size()``/``rank()`` return None.
    """

    process_set_id = None
    ranks = None
    mpi_comm = None  # Horovod's field; kolo makes sets from rank lists only

    def __init__(self, ranks_or_comm):
        if isinstance(ranks_or_comm, (str, bytes)) or not hasattr(ranks_or_comm, "__iter__"):
            raise ValueError(
                "ProcessSet should be initialized with a list of process ranks (kolo does not "
                "take an MPI communicator here); got %r" % (ranks_or_comm,))
        ranks = list(ranks_or_comm)
        if any(isinstance(r, bool) or not isinstance(r, int) for r in ranks):
            raise ValueError("ProcessSet should be initialized with a list of process ranks "
                             "(ints); got %r" % (ranks,))
        self.ranks = sorted(ranks)

    def _invalidate(self):
        self.process_set_id = None

    def size(self):
        """The number of ranks in the set, or None when the set is not registered."""
        if self.process_set_id is None:
            return None
        size = _k.process_set_size(self.process_set_id)
        if size < 0:
            _check_initialized()
            raise ValueError("Process set %d is not known." % self.process_set_id)
        return size

    def rank(self):
        """This process's rank inside the set (its index in ``ranks``), or None when the set is
        not registered. ValueError on a rank that is not a member. As in Horovod, broadcast's
        ``root_rank`` is a global rank nevertheless."""
        if self.process_set_id is None:
            return None
        rank = _k.process_set_rank(self.process_set_id)
        if rank < 0:
            _check_initialized()
            if _k.process_set_size(self.process_set_id) < 0:
                raise ValueError("Process set %d is not known." % self.process_set_id)
            raise ValueError("Current process is not part of this process set.")
        return rank

    def included(self):
        """Whether this process is a member of the set (None when it has no ranks)."""
        if self.ranks is None:
            return None
        return _basics.rank() in self.ranks

    def __str__(self):
        return "ProcessSet(process_set_id=%s, ranks=%s, mpi_comm=%s)" % (
            self.process_set_id, self.ranks, self.mpi_comm)

    __repr__ = __str__

    def __eq__(self, other):
        if not isinstance(other, ProcessSet):
            return NotImplemented
        return self.process_set_id == other.process_set_id and self.ranks == other.ranks

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self):  # equal sets have equal ranks (the global set's are known after init)
        return hash(tuple(self.ranks or ()))


class _GlobalProcessSet(ProcessSet):
    """Every rank, id 0: ``hvd.global_process_set``, the default of every operation."""

    process_set_id = 0

    def __init__(self):  # no ranks of its own: they are the job's
        pass

    @property
    def ranks(self):
        return list(range(_k.size())) if _k.is_initialized() else []

    def _invalidate(self):  # the global set is never removed
        pass

    def size(self):
        return _basics.size()

    def rank(self):
        return _basics.rank()

    def included(self):
        return True


global_process_set = _GlobalProcessSet()

# Registered sets of this process: id -> the ProcessSet objects bound to it, invalidated together
# on removal and at shutdown (kolo numbers sets afresh after a new init).
_registered = {}


def _check_initialized():
    if not _k.is_initialized():
        raise ValueError(_basics._NOT_INITIALIZED)


def _process_set_id(process_set, what="operation"):
    """The kolo id of an operation's ``process_set`` argument (None: the global set)."""
    if process_set is None:
        return 0
    if not isinstance(process_set, ProcessSet):
        raise ValueError("kolo %s: process_set must be a hvd.ProcessSet (or None for the global "
                         "one); got %r" % (what, process_set))
    if process_set.process_set_id is None:
        raise ValueError("kolo %s: %s is not registered: add it with hvd.add_process_set() "
                         "(or hvd.init(process_sets=...)) first; a removed set cannot be used"
                         % (what, process_set))
    return process_set.process_set_id


def _as_set(process_set):
    """An operation's ``process_set`` argument as a ProcessSet (None: the global set)."""
    return global_process_set if process_set is None else process_set


def _set_error(e):
    """A KoloError of add/remove as Horovod raises it: ValueError for a rejected list (kept as
    an InvalidSubmissionError, so also a HorovodInternalError), with the runtime's message."""
    return _basics._internal_error(e, at_submission=True)


def _bind(process_set, process_set_id):
    process_set.process_set_id = process_set_id
    bound = _registered.setdefault(process_set_id, [])
    if not any(p is process_set for p in bound):
        bound.append(process_set)


def add_process_set(process_set):
    """Registers a set of ranks (a ProcessSet or a list of global ranks) and returns its
    ProcessSet, with ``process_set_id`` set. Collective over every rank of the job (members or
    not), each passing the same ranks.

    Raises ValueError (an InvalidSubmissionError, also a HorovodInternalError) on every rank
    when the ranks are invalid (empty, out of range, repeated), differ between ranks, or equal
    those of a registered set, the global one included (Horovod: "duplicate process set");
    the message is the runtime's, naming the ranks."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    _check_initialized()
    ranks = process_set.ranks
    if ranks == global_process_set.ranks:
        # The global set already has these ranks (Horovod refuses the duplicate). The refusal
        # still takes part in the collective, with an invalid list, so a rank that passed
        # other ranks fails as well instead of waiting.
        try:
            _k.add_process_set([])
        except _k.KoloError:
            pass
        raise _basics.InvalidSubmissionError(
            "add_process_set: ranks %s are those of the global process set (id 0): attempted to "
            "add a duplicate process set" % (ranks,))
    try:
        process_set_id = _k.add_process_set(ranks)
    except _k.KoloError as e:
        raise _set_error(e) from e
    _bind(process_set, process_set_id)
    return process_set


def remove_process_set(process_set):
    """Removes a registered set; collective over every rank, all passing the same set.
    Returns True when it was removed (its ProcessSet objects are then unregistered:
    ``process_set_id`` None), False otherwise, as Horovod: for the global set, a set that is
    not registered, or one the runtime refuses to remove (a RuntimeWarning then carries the
    runtime's message, e.g. when ranks passed different sets)."""
    process_set_id = process_set.process_set_id
    if not _k.is_initialized():
        if process_set_id in (None, 0):
            return False
        raise ValueError(_basics._NOT_INITIALIZED)
    # Every rank takes part, even with nothing to remove (id 0 is refused by the runtime), so
    # that a rank whose set differs fails with the others instead of leaving them waiting.
    try:
        _k.remove_process_set(0 if process_set_id is None else process_set_id)
    except _k.KoloError as e:
        if getattr(e, "code", None) != _basics._INVALID_ARGUMENT:
            raise _basics._internal_error(e) from e
        if process_set_id not in (None, 0):
            warnings.warn("kolo remove_process_set(%s): %s" % (process_set, e), RuntimeWarning)
        return False
    for p in _registered.pop(process_set_id, [process_set]):
        p._invalidate()
    process_set._invalidate()
    return True


def _init_process_sets(process_sets):
    """hvd.init(process_sets=...): registers each set (a ProcessSet or a list of ranks) in
    order, every rank passing the same list. A set with the global set's ranks is bound to
    id 0; a set already registered (by an earlier entry, or before a repeated init) is bound to
    its id, as Horovod does at init."""
    if process_sets is None or process_sets == "dynamic":  # kolo's sets are always dynamic
        return
    if isinstance(process_sets, ProcessSet) or not hasattr(process_sets, "__iter__"):
        raise ValueError("init(process_sets=...) takes a list of hvd.ProcessSet or of rank "
                         "lists; got %r" % (process_sets,))
    for entry in process_sets:
        ps = entry if isinstance(entry, ProcessSet) else ProcessSet(entry)
        if ps is global_process_set:
            continue
        if ps.ranks == global_process_set.ranks:
            ps.process_set_id = 0
            continue
        known = [i for i, bound in _registered.items() if bound and bound[0].ranks == ps.ranks]
        if known:
            _bind(ps, known[0])
        else:
            add_process_set(ps)


def _reset():
    """After shutdown: every registered set is gone with the runtime."""
    for bound in _registered.values():
        for p in bound:
            p._invalidate()
    _registered.clear()
