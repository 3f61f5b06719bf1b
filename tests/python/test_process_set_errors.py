"""Process sets in kolo.torch: what is refused, on every rank, with a message that names the
ranks and the values: lists that differ between ranks, duplicate or invalid sets, operations of a
non-member, a broadcast root outside the set, a mismatch inside a set, removed or unregistered
sets; and the sets hvd.init(process_sets=...) registers.
"""
import warnings

import pytest
import torch

import kolo.torch as hvd
from kolo import _kolo
from kolo.torch import process_sets as _process_sets
from kolo_reference import assert_matches
from process_set_util import added, partition, set_ranks


# ---- errors -----------------------------------------------------------------------------------


def test_lists_that_differ_between_ranks_fail_on_every_rank():
    mine = [0] if hvd.rank() == 0 else [1]
    with pytest.raises(ValueError, match="every rank must pass the same ranks") as info:
        hvd.add_process_set(mine)
    assert isinstance(info.value, hvd.HorovodInternalError)
    assert "[0]" in str(info.value) and "[1]" in str(info.value), str(info.value)
    # nothing was added: the same ranks can be added now
    with added([1]) as ps:
        assert ps.size() == 1


def test_duplicate_and_invalid_sets_are_refused():
    n = hvd.size()
    with added([0]):
        with pytest.raises(ValueError, match=r"already has ranks \[0\]"):
            hvd.add_process_set([0])
    with pytest.raises(ValueError, match="duplicate"):
        hvd.add_process_set(list(range(n)))  # the global set's ranks
    with pytest.raises(ValueError, match="outside"):
        hvd.add_process_set([0, n])
    with pytest.raises(ValueError, match="empty"):
        hvd.add_process_set([])
    with pytest.raises(ValueError, match="twice"):
        hvd.add_process_set(hvd.ProcessSet([0, 0]))
    # after all that, sets still work
    with added([0]) as ps:
        if ps.included():
            assert_matches(hvd.allreduce(torch.ones(1), process_set=ps), torch.ones(1))


def test_operations_of_a_non_member_are_refused():
    ranks = set_ranks("without_last")
    with added(ranks) as ps:
        if ps.included():
            return
        t = torch.ones(2, 2)
        calls = {
            "allreduce": lambda: hvd.allreduce(t, process_set=ps),
            "allreduce_async_": lambda: hvd.allreduce_async_(t.clone(), process_set=ps),
            "grouped_allreduce": lambda: hvd.grouped_allreduce([t, t], process_set=ps),
            "allgather": lambda: hvd.allgather(t, process_set=ps),
            "grouped_allgather": lambda: hvd.grouped_allgather([t], process_set=ps),
            "broadcast": lambda: hvd.broadcast(t, root_rank=0, process_set=ps),
            "broadcast_": lambda: hvd.broadcast_(t.clone(), root_rank=0, process_set=ps),
            "alltoall": lambda: hvd.alltoall(t, splits=[1, 1], process_set=ps),
            "reducescatter": lambda: hvd.reducescatter(t, process_set=ps),
            "grouped_reducescatter": lambda: hvd.grouped_reducescatter([t], process_set=ps),
            "barrier": lambda: hvd.barrier(process_set=ps),
            "broadcast_object": lambda: hvd.broadcast_object(1, root_rank=0, process_set=ps),
            "allgather_object": lambda: hvd.allgather_object(1, process_set=ps),
        }
        for what, call in calls.items():
            with pytest.raises(ValueError,
                               match="is not in process set %d" % ps.process_set_id) as info:
                call()
            assert isinstance(info.value, hvd.HorovodInternalError), what


def test_broadcast_root_outside_the_set_fails_on_every_member():
    ranks = set_ranks("without_last")
    outsider = hvd.size() - 1
    with added(ranks) as ps:
        if not ps.included():
            return
        with pytest.raises(ValueError, match="root rank %d is not in process set" % outsider):
            hvd.broadcast(torch.ones(2), root_rank=outsider, name="ps.badroot", process_set=ps)
        # a root outside on one member only: the others fail too instead of waiting
        root = outsider if hvd.rank() == 0 else 0
        with pytest.raises(hvd.HorovodInternalError) as info:
            hvd.broadcast(torch.ones(2), root_rank=root, name="ps.badroot1", process_set=ps)
        if hvd.rank() == 0:
            assert isinstance(info.value, ValueError), repr(info.value)
            assert "root rank %d is not in process set" % outsider in str(info.value)
        else:
            assert "ps.badroot1" in str(info.value) and "refused" in str(info.value)
        out = hvd.broadcast(torch.full((2,), float(hvd.rank())), root_rank=ranks[-1],
                            name="ps.goodroot", process_set=ps)
    assert torch.equal(out, torch.full((2,), float(ranks[-1])))


def test_mismatch_inside_a_set_fails_on_its_members():
    with partition() as ps:
        k = ps.size()
        if k == 1:
            return  # nobody to disagree with
        shape = (2, 3) if ps.rank() == 0 else (3, 2)
        with pytest.raises(hvd.HorovodInternalError, match="ps.mismatch"):
            hvd.allreduce(torch.ones(shape), name="ps.mismatch", process_set=ps)
        # and the set works on
        out = hvd.allreduce(torch.ones(2), op=hvd.Sum, name="ps.after", process_set=ps)
    assert_matches(out, torch.full((2,), float(k)))


def test_removed_or_unregistered_sets_are_refused():
    ps = hvd.add_process_set(set_ranks("without_last"))
    old_id = ps.process_set_id
    assert hvd.remove_process_set(ps)
    for p in (ps, hvd.ProcessSet([0])):
        with pytest.raises(ValueError, match="not registered"):
            hvd.allreduce(torch.ones(1), process_set=p)
        with pytest.raises(ValueError, match="not registered"):
            hvd.barrier(process_set=p)
        with pytest.raises(ValueError, match="not registered"):
            hvd.DistributedOptimizer(torch.optim.SGD([torch.zeros(1, requires_grad=True)],
                                                     lr=1.0), process_set=p)
    with pytest.raises(ValueError, match="process_set must be"):
        hvd.allgather(torch.ones(1), process_set=1)
    # the runtime itself refuses the removed id, naming it
    with pytest.raises(_kolo.KoloError, match="no process set %d" % old_id):
        _kolo.allreduce_async("ps.stale", torch.utils.dlpack.to_dlpack(torch.ones(1)),
                              torch.utils.dlpack.to_dlpack(torch.ones(1)), _kolo.FLOAT32,
                              _kolo.SUM, 1.0, 1.0, old_id)


def test_remove_with_different_sets_returns_false_everywhere():
    with added([0]) as a:
        with added(set_ranks("odds")) as b:
            mine = a if hvd.rank() == 0 else b
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                assert hvd.remove_process_set(mine) is False
            assert any("every rank must remove the same process set" in str(w.message)
                       for w in caught), [str(w.message) for w in caught]
            assert a.process_set_id is not None and b.process_set_id is not None


def test_init_registers_process_sets():
    # init(process_sets=...) after a shutdown: sets made before it are unregistered, the listed
    # ones are registered in order (rank lists or ProcessSet objects).
    evens = hvd.ProcessSet(set_ranks("evens"))
    odds = set_ranks("odds")
    everyone = hvd.ProcessSet(range(hvd.size()))
    before = hvd.add_process_set([0])
    hvd.barrier()
    hvd.shutdown()
    try:
        assert before.process_set_id is None
        hvd.init(process_sets=[evens, odds, everyone])
    except BaseException:
        hvd.init()
        raise
    assert evens.process_set_id is not None and evens.size() == len(evens.ranks)
    assert everyone.process_set_id == 0
    odds_set = hvd.ProcessSet(odds)
    assert odds_set != evens
    try:
        if evens.included():
            out = hvd.allreduce(torch.ones(1), op=hvd.Sum, process_set=evens)
            assert_matches(out, torch.full((1,), float(len(evens.ranks))))
        # the odds set was registered too: adding it again is a duplicate
        with pytest.raises(ValueError, match="already has ranks"):
            hvd.add_process_set(odds)
    finally:
        for pid in sorted(_process_sets._registered):
            assert hvd.remove_process_set(_process_sets._registered[pid][0])
