"""kolo.torch all-gather (first dimension differs per rank, 0 rows included), broadcast from
every root, and their grouped forms."""
import pytest
import torch

import kolo.torch as hvd
from kolo_reference import ALL_DTYPES, assert_matches, dtype_id, rank_values


def rows_of(rank):
    """Rank r contributes r rows: rank 0 contributes none."""
    return rank


def gather_inputs(key, dtype, trailing, rows=rows_of):
    n = hvd.size()
    return [rank_values(key, r, dtype, (rows(r),) + tuple(trailing), "Sum", n) for r in range(n)]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_allgather_rows_per_rank(dtype):
    inputs = gather_inputs(("allgather", dtype_id(dtype)), dtype, (3, 2))
    mine = inputs[hvd.rank()]
    before = mine.clone()
    out = hvd.allgather(mine)
    assert_matches(out, torch.cat(inputs), "allgather %s" % dtype_id(dtype))
    assert torch.equal(mine, before)


@pytest.mark.parametrize("case", ["1d", "every-rank-0-rows", "same-rows", "async"])
def test_allgather_shapes(case):
    if case == "1d":
        inputs = gather_inputs("ag-1d", torch.float64, (), rows=lambda r: 2 * r + 1)
        out = hvd.allgather(inputs[hvd.rank()])
    elif case == "every-rank-0-rows":
        inputs = gather_inputs("ag-0", torch.float32, (4,), rows=lambda r: 0)
        out = hvd.allgather(inputs[hvd.rank()])
    elif case == "same-rows":
        inputs = gather_inputs("ag-same", torch.int32, (2, 2), rows=lambda r: 3)
        out = hvd.allgather(inputs[hvd.rank()], name="allgather.same.rows")
    else:
        inputs = gather_inputs("ag-async", torch.float32, (5,), rows=lambda r: r + 1)
        out = hvd.synchronize(hvd.allgather_async(inputs[hvd.rank()], name="allgather.async"))
    assert_matches(out, torch.cat(inputs), case)


def test_allgather_non_contiguous():
    n = hvd.size()
    bases = [rank_values("ag-nc", r, torch.float32, (3, r + 2), "Sum", n) for r in range(n)]
    views = [b.t() for b in bases]  # (r + 2, 3), non-contiguous
    out = hvd.allgather(views[hvd.rank()])
    assert_matches(out, torch.cat([v.contiguous() for v in views]), "allgather of a view")


def test_allgather_async_burst():
    jobs = []
    for i in range(20):
        dtype = [torch.float32, torch.int64, torch.uint8, torch.bfloat16][i % 4]
        inputs = gather_inputs(("ag-burst", i), dtype, (i % 3 + 1,),
                               rows=lambda r, i=i: (r + i) % 3)
        jobs.append((hvd.allgather_async(inputs[hvd.rank()]), inputs))
    for i, (handle, inputs) in enumerate(jobs):
        assert_matches(hvd.synchronize(handle), torch.cat(inputs), "burst allgather %d" % i)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_broadcast_from_every_root(dtype):
    n = hvd.size()
    for root in range(n):
        inputs = [rank_values(("bcast", dtype_id(dtype), root), r, dtype, (4, 3), "Sum", n)
                  for r in range(n)]
        expected = inputs[root]
        # Out of place: input untouched.
        mine = inputs[hvd.rank()].clone()
        out = hvd.broadcast(mine, root_rank=root)
        assert_matches(out, expected, "broadcast from %d" % root)
        assert torch.equal(mine, inputs[hvd.rank()]), "broadcast modified its input"
        out = hvd.synchronize(hvd.broadcast_async(mine, root_rank=root))
        assert_matches(out, expected, "broadcast_async from %d" % root)
        assert torch.equal(mine, inputs[hvd.rank()]), "broadcast_async modified its input"
        # In place.
        out = hvd.broadcast_(mine, root_rank=root)
        assert_matches(mine, expected, "broadcast_ from %d (tensor)" % root)
        assert out is mine, "broadcast_ must return its argument"
        mine = inputs[hvd.rank()].clone()
        out = hvd.synchronize(hvd.broadcast_async_(mine, root_rank=root))
        assert_matches(mine, expected, "broadcast_async_ from %d (tensor)" % root)
        assert out is mine, "synchronize(broadcast_async_(t)) must return t"


@pytest.mark.parametrize("shape", [(), (0,), (3, 0)], ids=["0-d", "0", "3x0"])
def test_broadcast_scalar_and_empty(shape):
    n = hvd.size()
    inputs = [rank_values(("bcast-small", shape), r, torch.float64, shape, "Sum", n)
              for r in range(n)]
    root = n - 1
    out = hvd.broadcast(inputs[hvd.rank()], root_rank=root, name="bcast.small")
    assert_matches(out, inputs[root], "broadcast of shape %s" % (shape,))
    mine = inputs[hvd.rank()].clone()
    hvd.broadcast_(mine, root_rank=root)
    assert_matches(mine, inputs[root], "broadcast_ of shape %s" % (shape,))


def test_broadcast_non_contiguous_in_place():
    n = hvd.size()
    root = n - 1
    bases = [rank_values("bcast-nc", r, torch.int32, (5, 4), "Sum", n) for r in range(n)]
    base = bases[hvd.rank()].clone()
    view = base[::2, :].t()  # (4, 3), non-contiguous
    assert not view.is_contiguous()
    expected_view = bases[root][::2, :].t()
    out = hvd.broadcast(view, root_rank=root)
    assert_matches(out, expected_view.contiguous(), "broadcast of a view")
    assert torch.equal(base, bases[hvd.rank()])
    hvd.broadcast_(view, root_rank=root)
    assert_matches(view, expected_view.contiguous(), "broadcast_ into a view")
    expected_base = bases[hvd.rank()].clone()
    expected_base[::2, :] = bases[root][::2, :]
    assert_matches(base, expected_base, "base tensor after broadcast_ into its view")


@pytest.mark.parametrize("variant", ["grouped_allgather", "grouped_allgather_async"])
def test_grouped_allgather(variant):
    n = hvd.size()
    specs = [(torch.float32, (3,), lambda r: r), (torch.int64, (), lambda r: 2 * r + 1),
             (torch.float64, (2, 2), lambda r: 1), (torch.bool, (4,), lambda r: n - r)]
    all_inputs = [gather_inputs(("grouped-ag", variant, i), dtype, trailing, rows)
                  for i, (dtype, trailing, rows) in enumerate(specs)]
    mine = [inputs[hvd.rank()] for inputs in all_inputs]
    if variant == "grouped_allgather":
        result = hvd.grouped_allgather(mine)
    else:
        result = hvd.synchronize(hvd.grouped_allgather_async(mine))
    assert len(result) == len(specs)
    for i, (out, inputs) in enumerate(zip(result, all_inputs)):
        assert_matches(out, torch.cat(inputs), "%s tensor %d" % (variant, i))
