"""What would otherwise hang: ranks that disagree about a group, and a signal reaching a rank
blocked in synchronize. Each ends promptly with an error on every rank, and the next operation
works."""
import signal
import time

import pytest
import torch

import kolo.torch as hvd
from kolo_reference import all_rank_values, assert_matches, reference_allreduce


def _next_op_works(key):
    inputs = all_rank_values(("after-hang", key), torch.float64, (5,))
    out = hvd.allreduce(inputs[hvd.rank()], op=hvd.Sum, name="after.%s" % key)
    assert_matches(out, reference_allreduce(inputs, "Sum"), "the operation after the error")


@pytest.mark.parametrize("collective", ["allreduce", "allgather"])
def test_grouped_member_count_differs(collective):
    # The last rank groups three tensors, the others two: every member fails on every rank,
    # the third included, within seconds (no stall setting).
    last = hvd.rank() == hvd.size() - 1
    tensors = [torch.full((3,), float(hvd.rank() + i)) for i in range(3 if last else 2)]
    fn = hvd.grouped_allreduce if collective == "allreduce" else hvd.grouped_allgather
    start = time.monotonic()
    with pytest.raises(hvd.HorovodInternalError) as info:
        fn(tensors, name="count.%s" % collective)
    assert time.monotonic() - start < 10
    message = str(info.value)
    assert "grouped different tensors" in message, message
    assert ("rank %d grouped 3 tensors" % (hvd.size() - 1)) in message, message
    _next_op_works("count.%s" % collective)


def test_a_signal_interrupts_a_blocked_synchronize():
    # Rank 0 waits for an allreduce the others submit only later (they compute meanwhile, so
    # this is no deadlock): a SIGALRM handler's exception ends the wait at once; the operation
    # goes on and a second synchronize returns its result.
    class Alarm(Exception):
        pass

    def on_alarm(signum, frame):
        raise Alarm()

    inputs = all_rank_values("signal", torch.float64, (7,))
    name = "signal.wait"
    previous = signal.signal(signal.SIGALRM, on_alarm)
    try:
        handle = None
        if hvd.rank() == 0:
            handle = hvd.allreduce_async(inputs[0], name=name, op=hvd.Sum)
            signal.setitimer(signal.ITIMER_REAL, 0.3)
            start = time.monotonic()
            with pytest.raises(Alarm):
                hvd.synchronize(handle)
            assert time.monotonic() - start < 2.0, "the signal waited for the operation"
        else:
            time.sleep(3.0)
        if hvd.rank() != 0:
            handle = hvd.allreduce_async(inputs[hvd.rank()], name=name, op=hvd.Sum)
        out = hvd.synchronize(handle)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert_matches(out, reference_allreduce(inputs, "Sum"), "the interrupted allreduce")


def test_the_same_name_under_different_collectives_fails_on_every_rank():
    # Rank 0 all-reduces 'x', the others all-gather 'x': kolo.torch negotiates them as
    # "allreduce.x" and "allgather.x", which no rank would ever complete. The deadlock check
    # fails both on every rank within seconds, naming the name and who called what.
    x = torch.full((2,), float(hvd.rank()))
    start = time.monotonic()
    with pytest.raises(hvd.HorovodInternalError) as info:
        if hvd.rank() == 0:
            hvd.allreduce(x, name="x", op=hvd.Sum)
        else:
            hvd.allgather(x, name="x")
    assert time.monotonic() - start < 10
    others = "rank 1" if hvd.size() == 2 else "ranks 1-%d" % (hvd.size() - 1)
    if hvd.size() == 3:
        others = "ranks 1,2"
    message = str(info.value)
    assert "'x': " in message and ("%s called allgather" % others) in message, message
    assert "rank 0 called allreduce" in message, message
    assert "deadlock" in message, message
    _next_op_works("same-name")


def test_ranks_waiting_for_different_operations_fail_with_what_each_waits_for():
    # The general case: rank 0 waits for 'a', the others for 'b'.
    t = torch.ones(3)
    with pytest.raises(hvd.HorovodInternalError) as info:
        hvd.allreduce(t, name="a" if hvd.rank() == 0 else "b", op=hvd.Sum)
    message = str(info.value)
    assert "rank 0 waits for allreduce 'allreduce.a'" in message, message
    _next_op_works("waits")


def test_remove_process_set_with_different_sets_fails_on_every_rank():
    # Rank 0 removes one set, the others another: every rank fails at once, naming both ids
    # and who passed which; both sets stay.
    a = hvd.add_process_set([0])
    b = hvd.add_process_set(list(range(1, hvd.size())))
    try:
        mine = a if hvd.rank() == 0 else b
        start = time.monotonic()
        with pytest.warns(RuntimeWarning) as caught:
            assert hvd.remove_process_set(mine) is False
        assert time.monotonic() - start < 10
        others = "rank 1 removes" if hvd.size() == 2 else "ranks 1,2 remove"
        expected = "remove_process_set(%d): every rank must remove the same process set: " \
                   "rank 0 removes %d, %s %d" % (mine.process_set_id, a.process_set_id, others,
                                                  b.process_set_id)
        assert any(expected in str(w.message) for w in caught), [str(w.message) for w in caught]
        _next_op_works("remove-differs")
    finally:
        assert hvd.remove_process_set(a) and hvd.remove_process_set(b)


def test_remove_process_set_a_rank_never_calls_ends_within_seconds():
    # The last rank goes on to an allreduce instead of removing the set: the removal and the
    # allreduce both fail on every rank within seconds (no stall setting), naming the call and
    # the rank that did not make it; the set stays, and the next operation works.
    ps = hvd.add_process_set([0])
    try:
        last = hvd.rank() == hvd.size() - 1
        start = time.monotonic()
        with pytest.raises(hvd.HorovodInternalError) as info:
            if last:
                hvd.allreduce(torch.ones(2), name="instead", op=hvd.Sum)
            else:
                hvd.remove_process_set(ps)
        assert time.monotonic() - start < 10
        message = str(info.value)
        if not last:
            assert message.startswith("remove_process_set(%d): " % ps.process_set_id), message
        assert "deadlock" in message, message
        assert "not submitted by rank %d" % (hvd.size() - 1) in message, message
        assert "rank %d waits for allreduce 'allreduce.instead'" % (hvd.size() - 1) in message, \
            message
        _next_op_works("remove-missing")
    finally:
        assert hvd.remove_process_set(ps)
