"""kolo.torch all-reduce: every dtype x op x variant, scaling, layouts, bursts, grouped."""
import time
import warnings

import pytest
import torch

import kolo.torch as hvd
from kolo_reference import (ALL_DTYPES, FLOAT_DTYPES, OP_NAMES, all_rank_values, assert_matches,
                            dtype_id, op_of, reference_allreduce)

VARIANTS = ["allreduce", "allreduce_async", "allreduce_", "allreduce_async_"]


def run_allreduce(variant, tensor, **kwargs):
    """Runs one of the four all-reduce entry points; returns the result tensor."""
    if variant == "allreduce":
        return hvd.allreduce(tensor, **kwargs)
    if variant == "allreduce_async":
        return hvd.synchronize(hvd.allreduce_async(tensor, **kwargs))
    if variant == "allreduce_":
        return hvd.allreduce_(tensor, **kwargs)
    if variant == "allreduce_async_":
        return hvd.synchronize(hvd.allreduce_async_(tensor, **kwargs))
    raise ValueError(variant)


def check_allreduce(variant, tensor, expected, what, **kwargs):
    """Runs `variant` on `tensor` and checks the result, the in-place write (in-place variants)
    or that the input is untouched (the others)."""
    before = tensor.clone()
    out = run_allreduce(variant, tensor, **kwargs)
    assert_matches(out, expected, what + ": result")
    if variant.endswith("_"):
        assert_matches(tensor, expected, what + ": the tensor reduced in place")
        assert out is tensor, what + ": the in-place variant must return its argument"
    else:
        assert torch.equal(tensor, before), what + ": the input was modified"
    return out


def _supported(dtype, op):
    return not (dtype == torch.bool and op == "Average")


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("op", OP_NAMES)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_allreduce_dtype_op(dtype, op, variant):
    key = ("allreduce", dtype_id(dtype), op, variant)
    inputs = all_rank_values(key, dtype, (3, 5), op)
    mine = inputs[hvd.rank()].clone()
    if not _supported(dtype, op):
        # kolo.h: Average is refused for bool (at submission, on every rank here).
        with pytest.raises((hvd.HorovodInternalError, ValueError, TypeError)) as info:
            run_allreduce(variant, mine, op=op_of(op))
        assert "bool" in str(info.value).lower() or "average" in str(info.value).lower(), \
            str(info.value)
        return
    expected = reference_allreduce(inputs, op)
    check_allreduce(variant, mine, expected, "%s %s %s" % (variant, dtype_id(dtype), op),
                    op=op_of(op))


@pytest.mark.parametrize("variant", VARIANTS)
def test_allreduce_default_op_is_average(variant):
    inputs = all_rank_values(("default-op", variant), torch.float32, (7,))
    check_allreduce(variant, inputs[hvd.rank()].clone(), reference_allreduce(inputs, "Average"),
                    variant)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int8], ids=dtype_id)
def test_integer_average_truncates_toward_zero(dtype):
    # Sums that are negative and not multiples of size: truncation toward zero and floor
    # division give different answers (e.g. -1/2: 0, not -1).
    n = hvd.size()
    values = [torch.tensor([-1 if r == 0 else 0, -(n + 1) if r == 0 else 0,
                            2 * n + 1 if r == 0 else 0, -r], dtype=dtype) for r in range(n)]
    expected = reference_allreduce(values, "Average")
    sums = torch.stack([v.to(torch.int64) for v in values]).sum(0)
    # Sanity of the reference itself: truncation toward zero, not floor.
    assert expected.tolist() == [int(s / n) for s in sums.tolist()]
    out = hvd.allreduce(values[hvd.rank()], op=hvd.Average)
    assert_matches(out, expected, "integer Average")


def test_average_argument_is_deprecated_but_honoured():
    inputs = all_rank_values("average-arg", torch.float64, (4,))
    mine = inputs[hvd.rank()]
    with pytest.warns(DeprecationWarning):
        out = hvd.allreduce(mine, average=True)
    assert_matches(out, reference_allreduce(inputs, "Average"), "average=True")
    with pytest.warns(DeprecationWarning):
        out = hvd.allreduce(mine, average=False)
    assert_matches(out, reference_allreduce(inputs, "Sum"), "average=False")
    with pytest.warns(DeprecationWarning):
        out = hvd.synchronize(hvd.allreduce_async(mine, average=False))
    assert_matches(out, reference_allreduce(inputs, "Sum"), "allreduce_async average=False")
    # Horovod: giving both op and average is a ValueError (raised locally, before submitting).
    with pytest.raises(ValueError):
        hvd.allreduce(mine, average=True, op=hvd.Sum)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("op", ["Sum", "Average", "Max"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
def test_prescale_postscale_float(dtype, op, variant):
    inputs = all_rank_values(("scale", dtype_id(dtype), op, variant), dtype, (6,), op)
    expected = reference_allreduce(inputs, op, prescale=1.5, postscale=0.25)
    check_allreduce(variant, inputs[hvd.rank()].clone(), expected,
                    "%s %s %s pre 1.5 post 0.25" % (variant, dtype_id(dtype), op),
                    op=op_of(op), prescale_factor=1.5, postscale_factor=0.25)


@pytest.mark.parametrize("op", ["Sum", "Max"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=dtype_id)
def test_prescale_postscale_integer_truncates(dtype, op):
    # kolo.h: for integer dtypes the scaled value is computed in double and truncated toward
    # zero, before the reduction (prescale) and after it (postscale).
    n = hvd.size()
    inputs = [torch.tensor([-5 - r, 3 + 2 * r, 7, -1, 0, 11 * (r + 1)], dtype=dtype)
              for r in range(n)]
    expected = reference_allreduce(inputs, op, prescale=1.5, postscale=0.5)
    out = hvd.allreduce(inputs[hvd.rank()], op=op_of(op), prescale_factor=1.5,
                        postscale_factor=0.5)
    assert_matches(out, expected, "integer scaling, %s" % op)


def test_compression_fp16_allreduce():
    inputs = all_rank_values("compress", torch.float32, (9,))
    expected = reference_allreduce([x.half() for x in inputs], "Average").float()
    out = hvd.allreduce(inputs[hvd.rank()], op=hvd.Average, compression=hvd.Compression.fp16)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, expected, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("layout", ["transposed", "strided", "expanded-dim"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.float16], ids=dtype_id)
def test_non_contiguous(dtype, layout, variant):
    key = ("noncontig", dtype_id(dtype), layout, variant)
    bases = all_rank_values(key, dtype, (4, 6))

    def view(base):
        if layout == "transposed":
            return base.t()
        if layout == "strided":
            return base[:, ::2]
        return base.unsqueeze(1).transpose(0, 2)  # (6, 1, 4), non-contiguous

    views = [view(b) for b in bases]
    expected = reference_allreduce([v.contiguous() for v in views], "Sum")
    base = bases[hvd.rank()].clone()
    base_before = base.clone()
    mine = view(base)
    assert not mine.is_contiguous()
    check_allreduce(variant, mine, expected, "%s %s %s" % (variant, layout, dtype_id(dtype)),
                    op=hvd.Sum)
    if variant.endswith("_"):
        # Written back through the view into the base tensor's storage.
        expected_base = base_before.clone()
        view(expected_base).copy_(expected)
        assert_matches(base, expected_base, "base tensor after the in-place reduction")
    else:
        assert torch.equal(base, base_before)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool], ids=dtype_id)
def test_scalar(dtype, variant):
    op = "Max" if dtype == torch.bool else "Sum"
    inputs = all_rank_values(("scalar", dtype_id(dtype), variant), dtype, (), op)
    assert inputs[0].dim() == 0
    check_allreduce(variant, inputs[hvd.rank()].clone(), reference_allreduce(inputs, op),
                    "0-d %s" % dtype_id(dtype), op=op_of(op))


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape", [(0,), (2, 0, 3)], ids=["0", "2x0x3"])
def test_empty(shape, variant):
    mine = torch.empty(shape, dtype=torch.float32)
    out = run_allreduce(variant, mine, op=hvd.Sum)
    assert tuple(out.shape) == shape and out.dtype == torch.float32
    # The next operation still works.
    inputs = all_rank_values(("after-empty", variant), torch.float32, (3,))
    assert_matches(hvd.allreduce(inputs[hvd.rank()], op=hvd.Sum),
                   reference_allreduce(inputs, "Sum"), "allreduce after an empty one")


def test_fused_async_burst():
    """Many submissions before any wait, so the runtime fuses them; waited in reverse order."""
    dtypes = [torch.float32, torch.float64, torch.int32, torch.float16, torch.int64,
              torch.bfloat16, torch.uint8]
    ops = ["Sum", "Average", "Max", "Min"]
    jobs = []
    for i in range(60):
        dtype = dtypes[i % len(dtypes)]
        op = ops[i % len(ops)]
        numel = [1, 7, 64, 333, 1000, 4097][i % 6]
        inputs = all_rank_values(("burst", i), dtype, (numel,), op)
        mine = inputs[hvd.rank()].clone()
        in_place = i % 3 == 0
        named = i % 2 == 0
        kwargs = dict(op=op_of(op))
        if named:
            kwargs["name"] = "burst.%d" % i
        handle = (hvd.allreduce_async_ if in_place else hvd.allreduce_async)(mine, **kwargs)
        jobs.append((i, handle, mine, inputs, op, in_place))
    for i, handle, mine, inputs, op, in_place in reversed(jobs):
        out = hvd.synchronize(handle)
        expected = reference_allreduce(inputs, op)
        assert_matches(out, expected, "burst tensor %d (%s %s)" % (i, mine.dtype, op))
        if in_place:
            assert_matches(mine, expected, "burst tensor %d in place" % i)
        else:
            assert torch.equal(mine, inputs[hvd.rank()])


def _barrier(name):
    hvd.allreduce(torch.zeros(1), name=name, op=hvd.Sum)


def test_poll_and_synchronize():
    inputs = all_rank_values("poll", torch.float32, (5,))
    expected = reference_allreduce(inputs, "Sum")
    mine = inputs[hvd.rank()]
    if hvd.rank() == 0:
        # The other ranks submit only after the barrier below, so this can't be complete yet.
        handle = hvd.allreduce_async(mine, name="poll.tensor", op=hvd.Sum)
        first = hvd.poll(handle)
        assert first is False, "poll() returned %r before the other ranks submitted" % (first,)
        _barrier("poll.barrier")
    else:
        _barrier("poll.barrier")
        handle = hvd.allreduce_async(mine, name="poll.tensor", op=hvd.Sum)
    deadline = time.monotonic() + 30
    while not hvd.poll(handle):
        assert time.monotonic() < deadline, "poll() still False after 30 s"
        time.sleep(0.001)
    assert hvd.poll(handle) is True
    assert_matches(hvd.synchronize(handle), expected, "synchronize after poll")


GROUPED_SHAPES = [(3,), (2, 2), (5, 1), ()]


@pytest.mark.parametrize("variant", ["grouped_allreduce", "grouped_allreduce_async",
                                     "grouped_allreduce_", "grouped_allreduce_async_"])
@pytest.mark.parametrize("op", ["Average", "Sum"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32], ids=dtype_id)
def test_grouped_allreduce(dtype, op, variant):
    all_inputs = [all_rank_values(("grouped", dtype_id(dtype), op, variant, i), dtype, shape, op)
                  for i, shape in enumerate(GROUPED_SHAPES)]
    expected = [reference_allreduce(inputs, op) for inputs in all_inputs]
    mine = [inputs[hvd.rank()].clone() for inputs in all_inputs]
    fn = getattr(hvd, variant)
    result = fn(mine, op=op_of(op))
    if "async" in variant:
        result = hvd.synchronize(result)
    assert len(result) == len(GROUPED_SHAPES)
    for i, (out, exp) in enumerate(zip(result, expected)):
        assert_matches(out, exp, "%s tensor %d" % (variant, i))
        if variant.endswith("_"):
            assert_matches(mine[i], exp, "%s tensor %d in place" % (variant, i))
            assert out is mine[i], "%s must return its arguments" % variant
        else:
            assert torch.equal(mine[i], all_inputs[i][hvd.rank()])


def test_grouped_allreduce_named_twice():
    # A group name may be reused once the previous group completed.
    for round_ in range(2):
        all_inputs = [all_rank_values(("grouped-named", round_, i), torch.float64, (4,))
                      for i in range(3)]
        result = hvd.grouped_allreduce([x[hvd.rank()] for x in all_inputs], name="group.named",
                                       op=hvd.Sum)
        for i, inputs in enumerate(all_inputs):
            assert_matches(result[i], reference_allreduce(inputs, "Sum"), "round %d" % round_)


def _sparse_rows(key, rank, rows, at):
    """Rank `rank`'s sparse input: rows `at` (two of them) hold values from `key`, the others
    are zero; made from a dense tensor (to_sparse does not warn on any torch)."""
    dense = torch.zeros(rows, 2, dtype=torch.float64)
    values = all_rank_values(key, torch.float64, (2, 2))[rank]
    dense[at[0]], dense[at[1]] = values[0], values[1]
    return dense.to_sparse()


@pytest.mark.parametrize("op", ["Sum", "Average"])
def test_sparse_allreduce_under_warnings_as_errors(op):
    # torch 2.x warns about sparse invariant checks unless told whether to check: kolo says
    # so, and the result is right under -W error.
    n = hvd.size()
    inputs = [_sparse_rows(("sparse-w", op), r, 4, (r % 4, (r + 1) % 4)) for r in range(n)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = hvd.sparse_allreduce_async(inputs[hvd.rank()], name="sparse.w.%s" % op,
                                         op=op_of(op))()
    assert out.is_sparse
    assert_matches(out.to_dense(), reference_allreduce([t.to_dense() for t in inputs], op),
                   "sparse allreduce")


def _torch_checks_sparse_invariants():
    try:
        torch.sparse_coo_tensor(torch.zeros(1, 0, dtype=torch.int64), torch.zeros(0), (1,),
                                check_invariants=True)
    except TypeError:
        return False
    return True


@pytest.mark.skipif(not _torch_checks_sparse_invariants(),
                    reason="this torch's sparse_coo_tensor has no check_invariants")
def test_sparse_allreduce_checks_indices_from_other_ranks():
    # Rank r's tensor has 4 + r rows and a value in its last one: every rank but the last
    # receives a row beyond its size and gets torch's error instead of an invalid tensor; the
    # last rank's size holds every row.
    n, r = hvd.size(), hvd.rank()

    def mine(q):
        return _sparse_rows("sparse-size", q, 4 + q, (q, 3 + q))

    handle = hvd.sparse_allreduce_async(mine(r), name="sparse.sizes", op=hvd.Sum)
    if r < n - 1:
        with pytest.raises(RuntimeError):
            handle()
        return
    expected = torch.zeros(4 + r, 2, dtype=torch.float64)
    for q in range(n):
        expected[:4 + q] += mine(q).to_dense()
    assert_matches(handle().to_dense(), expected, "sparse allreduce into the largest size")
