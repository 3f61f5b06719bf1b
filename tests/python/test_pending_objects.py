"""What a pending operation leaves for Python's cyclic garbage collector: one tracked object for
an in-place all-reduce or broadcast of a contiguous tensor (handles._Pending says why it
matters), and nothing once it is synchronized; the results stay right."""
import gc

import torch

import kolo.torch as hvd
from kolo_reference import all_rank_values, assert_matches, reference_allreduce

COUNT = 200


def _tracked_while_pending(submit, key):
    """Objects the collector tracks beyond those before, with COUNT operations pending (in
    objects per operation, rounded down) and after they were synchronized (a count; a few come
    from the submitting code itself); and the results."""
    inputs = [all_rank_values((key, k), torch.float32, (3,)) for k in range(COUNT)]
    tensors = [x[hvd.rank()].clone() for x in inputs]
    names = ["pending.%s.%d" % (key, k) for k in range(COUNT)]
    gc.collect()
    gc.disable()
    try:
        before = len(gc.get_objects())
        handles = [submit(t, n) for t, n in zip(tensors, names)]
        pending = (len(gc.get_objects()) - before) // COUNT
        results = [hvd.synchronize(h) for h in handles]
        del handles
        after = len(gc.get_objects()) - before
    finally:
        gc.enable()
    return pending, after, inputs, tensors, results


def test_in_place_allreduce_is_one_tracked_object():
    pending, after, inputs, tensors, results = _tracked_while_pending(
        lambda t, n: hvd.allreduce_async_(t, name=n, op=hvd.Sum), "allreduce_")
    assert pending == 1 and after < 5, (pending, after)
    for k, (x, t, r) in enumerate(zip(inputs, tensors, results)):
        assert r is t
        assert_matches(t, reference_allreduce(x, "Sum"), "tensor %d" % k)


def test_in_place_broadcast_is_one_tracked_object():
    pending, after, inputs, tensors, results = _tracked_while_pending(
        lambda t, n: hvd.broadcast_async_(t, root_rank=0, name=n), "broadcast_")
    assert pending == 1 and after < 5, (pending, after)
    for k, (x, t, r) in enumerate(zip(inputs, tensors, results)):
        assert r is t and torch.equal(t, x[0]), "tensor %d" % k


def test_non_contiguous_in_place_allreduce_copies_back():
    # The other registration: a contiguous copy is reduced and copied back at synchronize.
    inputs = all_rank_values("pending.strided", torch.float32, (4, 6))
    base = inputs[hvd.rank()].clone()
    view = base[:, ::2]
    assert not view.is_contiguous()
    out = hvd.synchronize(hvd.allreduce_async_(view, name="pending.strided", op=hvd.Sum))
    assert out is view
    expected = reference_allreduce([x[:, ::2] for x in inputs], "Sum")
    assert_matches(base[:, ::2], expected, "the strided view")
    assert torch.equal(base[:, 1::2], inputs[hvd.rank()][:, 1::2]), "elements outside the view"
