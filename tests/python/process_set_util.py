"""What the process-set tests share: the sets they use and a context that adds and removes one.

The sets (n = hvd.size(), 2 or 3 in the suite):
  "without_last": ranks 0..n-2 (the last rank is not a member: a non-member exists at every n);
  "evens" / "odds": a partition of the ranks, each rank working in its own set concurrently.
"""
import contextlib

import kolo.torch as hvd
from kolo_reference import rank_values


def set_ranks(kind):
    n = hvd.size()
    if kind == "without_last":
        return list(range(n - 1))
    if kind == "evens":
        return list(range(0, n, 2))
    if kind == "odds":
        return list(range(1, n, 2))
    raise ValueError(kind)


def my_partition():
    """The ranks of this rank's set in the evens/odds partition."""
    return set_ranks("evens" if hvd.rank() % 2 == 0 else "odds")


@contextlib.contextmanager
def added(ranks):
    ps = hvd.add_process_set(ranks)
    try:
        yield ps
    finally:
        hvd.remove_process_set(ps)


@contextlib.contextmanager
def partition():
    """Both sets of the evens/odds partition (added by every rank); yields this rank's."""
    evens = hvd.add_process_set(set_ranks("evens"))
    odds = hvd.add_process_set(set_ranks("odds"))
    try:
        yield evens if hvd.rank() % 2 == 0 else odds
    finally:
        hvd.remove_process_set(odds)
        hvd.remove_process_set(evens)


def values(key, rank, dtype, shape, op="Sum"):
    return rank_values(key, rank, dtype, shape, op, hvd.size())
