"""Errors: mismatches between ranks reach every rank as HorovodInternalError with the runtime's
message, and the runtime keeps working; local refusals are clear and never hang the others."""
import re

import pytest
import torch

import kolo.torch as hvd
from kolo.torch.basics import UnsupportedTensorError
from kolo_reference import all_rank_values, assert_matches, reference_allreduce


def _next_op_works(key):
    inputs = all_rank_values(("after-error", key), torch.float32, (6,))
    out = hvd.allreduce(inputs[hvd.rank()], op=hvd.Sum, name="after.%s" % key)
    assert_matches(out, reference_allreduce(inputs, "Sum"), "the operation after the error")
    # And an auto-named one, whose name counters must still agree across ranks.
    out = hvd.allreduce(inputs[hvd.rank()], op=hvd.Average)
    assert_matches(out, reference_allreduce(inputs, "Average"), "auto-named op after the error")


def _has_rank_value(message, rank, value):
    # "rank 1 has [3,3]" or, for ranks that agree, "ranks 1,2 have float64".
    if ("rank %d has %s" % (rank, value)) in message:
        return True
    for group, shown in re.findall(r"ranks ([0-9,\-]+) have (\[[^\]]*\]|[^\s,]+)", message):
        members = set()
        for part in group.split(","):
            lo, _, hi = part.partition("-")
            members.update(range(int(lo), int(hi or lo) + 1))
        if rank in members and shown == value:
            return True
    return False


def _expect_internal_error(fn):
    with pytest.raises(hvd.HorovodInternalError) as info:
        fn()
    return str(info.value)


@pytest.mark.parametrize("variant", ["allreduce", "allreduce_async"])
def test_shape_mismatch(variant):
    r = hvd.rank()
    tensor = torch.ones(r + 2, 3)
    name = "mismatch.shape.%s" % variant
    if variant == "allreduce":
        msg = _expect_internal_error(lambda: hvd.allreduce(tensor, name=name, op=hvd.Sum))
    else:
        handle = hvd.allreduce_async(tensor, name=name, op=hvd.Sum)  # submission succeeds
        msg = _expect_internal_error(lambda: hvd.synchronize(handle))
    assert name in msg, msg
    assert "shape" in msg and "mismatch" in msg, msg
    for s in range(hvd.size()):
        assert _has_rank_value(msg, s, "[%d,3]" % (s + 2)), \
            "rank %d's shape [%d,3] missing from: %s" % (s, s + 2, msg)
    assert torch.equal(tensor, torch.ones(r + 2, 3))  # a failed op leaves tensors alone
    _next_op_works("shape-" + variant)


def test_dtype_mismatch():
    dtype = torch.float32 if hvd.rank() == 0 else torch.float64
    msg = _expect_internal_error(
        lambda: hvd.allreduce(torch.ones(4, dtype=dtype), name="mismatch.dtype", op=hvd.Sum))
    assert "mismatch.dtype" in msg and "dtype" in msg, msg
    assert _has_rank_value(msg, 0, "float32"), msg
    for s in range(1, hvd.size()):
        assert _has_rank_value(msg, s, "float64"), msg
    _next_op_works("dtype")


def test_in_place_mismatch_leaves_tensor_untouched():
    r = hvd.rank()
    tensor = torch.full((2, r + 1), float(r))
    before = tensor.clone()
    msg = _expect_internal_error(lambda: hvd.allreduce_(tensor, name="mismatch.inplace"))
    assert "mismatch.inplace" in msg and "rank 0" in msg, msg
    assert torch.equal(tensor, before)
    _next_op_works("inplace")


def test_allgather_trailing_shape_mismatch():
    r = hvd.rank()
    tensor = torch.zeros(2, 3 + r)
    msg = _expect_internal_error(lambda: hvd.allgather(tensor, name="mismatch.allgather"))
    assert "mismatch.allgather" in msg and "mismatch" in msg, msg
    assert _has_rank_value(msg, 0, "[2,3]"), msg
    assert _has_rank_value(msg, 1, "[2,4]"), msg
    _next_op_works("allgather")


def test_broadcast_root_mismatch():
    r = hvd.rank()
    tensor = torch.full((3,), float(r))
    msg = _expect_internal_error(lambda: hvd.broadcast(tensor, root_rank=r, name="mismatch.root"))
    assert "mismatch.root" in msg and "root" in msg, msg
    for s in range(hvd.size()):
        assert _has_rank_value(msg, s, str(s)), msg
    _next_op_works("root")


def test_reduce_op_mismatch():
    op = hvd.Sum if hvd.rank() == 0 else hvd.Max
    msg = _expect_internal_error(
        lambda: hvd.allreduce(torch.ones(3), name="mismatch.op", op=op))
    assert "mismatch.op" in msg and "rank 0" in msg, msg
    _next_op_works("op")


def test_root_out_of_range_on_one_rank_fails_everywhere():
    # kolo.h: a submission one rank refuses fails there at once, and the other ranks' operation
    # of the same name fails with "rank R refused it: ..." instead of waiting forever.
    n = hvd.size()
    bad = n - 1
    root = n + 3 if hvd.rank() == bad else 0
    tensor = torch.ones(2)
    with pytest.raises((hvd.HorovodInternalError, ValueError)) as info:
        hvd.broadcast(tensor, root_rank=root, name="refused.root")
    msg = str(info.value)
    assert str(n + 3) in msg, msg
    if hvd.rank() != bad:
        assert isinstance(info.value, hvd.HorovodInternalError), repr(info.value)
        assert "refused.root" in msg and ("rank %d" % bad) in msg, msg
    _next_op_works("refused")


def test_unsupported_dtype():
    tensor = torch.ones(3, dtype=torch.complex64)
    for fn in (lambda: hvd.allreduce(tensor, name="complex.ar"),
               lambda: hvd.allreduce_async_(tensor, name="complex.ar_"),
               lambda: hvd.allgather(tensor, name="complex.ag"),
               lambda: hvd.broadcast(tensor, root_rank=0, name="complex.bc")):
        with pytest.raises((hvd.HorovodInternalError, ValueError, TypeError)) as info:
            fn()
        assert "complex" in str(info.value).lower(), str(info.value)
    _next_op_works("complex")


def test_unsupported_argument_layout_and_device():
    # Each refusal names the operation and what is wrong; the dtype's is test_unsupported_dtype.
    cases = [([1.0, 2.0], TypeError, "expected a torch.Tensor, got list"),
             (torch.ones(3).to_sparse(), UnsupportedTensorError, "torch.sparse_coo tensors"),
             (torch.ones(3, device="meta"), UnsupportedTensorError, "the tensor is on meta")]
    for k, (tensor, error, reason) in enumerate(cases):
        for op, fn in (("allreduce", lambda n: hvd.allreduce_async_(tensor, name=n)),
                       ("allgather", lambda n: hvd.allgather_async(tensor, name=n))):
            name = "refused.%d.%s" % (k, op)
            with pytest.raises(error) as info:
                fn(name)
            msg = str(info.value)
            assert ("%s '%s.%s'" % (op, op, name)) in msg and reason in msg, msg
    # In a group the message names the member and says the operation is grouped.
    with pytest.raises(UnsupportedTensorError) as info:
        hvd.grouped_allreduce_async([torch.ones(3), torch.ones(3, device="meta")],
                                    name="refused.group")
    msg = str(info.value)
    assert "grouped_allreduce 'allreduce.refused.group.1'" in msg, msg
    assert "the tensor is on meta" in msg, msg
    _next_op_works("layout")


def test_tensor_that_requires_grad():
    # A leaf that requires grad takes the detaching export (submission._capsule): its values
    # reduce as any other tensor's, and the leaf itself is left as it was.
    inputs = all_rank_values("requires-grad", torch.float32, (5,))
    mine = inputs[hvd.rank()].clone().requires_grad_()
    out = hvd.allreduce(mine, op=hvd.Sum, name="requires_grad")
    assert_matches(out, reference_allreduce(inputs, "Sum"), "all-reduce of a leaf requiring grad")
    assert mine.requires_grad and torch.equal(mine.detach(), inputs[hvd.rank()])


def test_name_reused_while_in_flight():
    # Deterministic: the owner of each phase submits first, tries the name again while the
    # others have not submitted yet (so the first op can't have completed), then lets them in.
    n = hvd.size()
    inputs = all_rank_values("inflight", torch.float32, (4,))
    mine = inputs[hvd.rank()]
    expected = reference_allreduce(inputs, "Sum")

    def barrier(tag):
        hvd.allreduce(torch.zeros(1), name="inflight.barrier.%s" % tag, op=hvd.Sum)

    def try_twice(name):
        handle = hvd.allreduce_async(mine, name=name, op=hvd.Sum)
        with pytest.raises((hvd.HorovodInternalError, ValueError, RuntimeError)) as info:
            hvd.allreduce_async(mine * 2, name=name, op=hvd.Sum)
        msg = str(info.value)
        assert name in msg and "in flight" in msg, msg
        return handle

    # Phase 0: rank 0 tries; phase 1: every other rank tries.
    if hvd.rank() == 0:
        h0 = try_twice("inflight.phase0")
        barrier(0)
        barrier(1)
        h1 = hvd.allreduce_async(mine, name="inflight.phase1", op=hvd.Sum)
    else:
        barrier(0)
        h0 = hvd.allreduce_async(mine, name="inflight.phase0", op=hvd.Sum)
        h1 = try_twice("inflight.phase1")
        barrier(1)
    # The first submissions were unaffected by the refused second ones.
    assert_matches(hvd.synchronize(h0), expected, "phase 0 result")
    assert_matches(hvd.synchronize(h1), expected, "phase 1 result")
    assert n >= 2
    # The name is free again once its operation completed.
    assert_matches(hvd.allreduce(mine, name="inflight.phase0", op=hvd.Sum), expected, "reuse")
    _next_op_works("inflight")


def test_grouped_in_place_refuses_aliased_tensors():
    t = torch.ones(8)
    with pytest.raises(ValueError, match="share memory"):
        hvd.grouped_allreduce_([t, t], op=hvd.Sum)
    with pytest.raises(ValueError, match="share memory"):
        hvd.grouped_allreduce_([t, t[2:5]], op=hvd.Sum)
    a, b = t[:4], t[4:]  # disjoint views of one storage are fine
    hvd.grouped_allreduce_([a, b], op=hvd.Sum)
    assert torch.equal(t, torch.full((8,), float(hvd.size())))


def test_names_with_nul_are_refused():
    with pytest.raises(Exception, match="NUL"):
        hvd.allreduce(torch.ones(2), name="loss\0rank%d" % hvd.rank())


def test_unpicklable_objects_fail_on_every_rank():
    unpicklable = (lambda x: x) if hvd.rank() == 0 else None
    with pytest.raises(ValueError, match="pickle"):
        hvd.broadcast_object(unpicklable, root_rank=0, name="bad-object")
    with pytest.raises(ValueError, match="pickle"):
        hvd.allgather_object(unpicklable, name="bad-objects")
    # and the next object goes through
    assert hvd.broadcast_object({"ok": 1}, root_rank=0, name="bad-object") == {"ok": 1}


def test_synchronize_after_shutdown_raises():
    # Different names on every rank: the operation can only end by the shutdown.
    handle = hvd.allreduce_async(torch.ones(2), name="orphan-%d" % hvd.rank())
    hvd.barrier()  # every rank has submitted before any shuts down
    hvd.shutdown()
    try:
        with pytest.raises(hvd.HorovodInternalError, match="shut down"):
            hvd.synchronize(handle)
    finally:
        hvd.init()
    assert_matches(hvd.allreduce(torch.ones(2), op=hvd.Sum, name="after-reinit"),
                   torch.full((2,), float(hvd.size())))


def test_a_tensor_refused_by_kolo_torch_on_one_rank_fails_on_the_others():
    # The last rank hands over a tensor kolo.torch refuses before it reaches the runtime (an
    # unsupported dtype): the refusal is announced, so the others fail instead of waiting.
    last = hvd.size() - 1
    if hvd.rank() == last:
        with pytest.raises(ValueError) as info:
            hvd.allreduce(torch.zeros(3, dtype=torch.complex64), name="refused.single")
        assert "not supported" in str(info.value)
        with pytest.raises(ValueError):
            hvd.grouped_allreduce([torch.zeros(2), torch.zeros(2, dtype=torch.complex64)],
                                  name="refused.group")
    else:
        with pytest.raises(hvd.HorovodInternalError) as info:
            hvd.allreduce(torch.zeros(3), name="refused.single")
        assert "rank %d refused it" % last in str(info.value), str(info.value)
        with pytest.raises(hvd.HorovodInternalError) as info:
            hvd.grouped_allreduce([torch.zeros(2), torch.zeros(2)], name="refused.group")
        assert "rank %d refused it" % last in str(info.value), str(info.value)
    hvd.barrier()
