"""kolo.torch all-reduce with op=Adasum: at a power-of-two number of ranks, against the tree
reference computed here in float64 from every rank's input (rebuilt locally); Horovod's
orthogonal and parallel checks (test/parallel/test_adasum_pytorch.py); at other counts a clear
error on every rank naming the count, after which the next operation runs."""
import math

import pytest
import torch

import kolo.torch as hvd
from kolo_reference import FLOAT_DTYPES, adasum_reference, all_rank_values, dtype_id

# Unit roundoff of the dtype a result is stored in (the reduction itself runs in float32, or
# float64 for float64).
ROUNDOFF = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8, torch.float32: 2.0 ** -24,
            torch.float64: 2.0 ** -53}


def power_of_two(n):
    return n & (n - 1) == 0


def check_adasum(actual, inputs, what, prescale=1.0, postscale=1.0):
    expected = adasum_reference([x.double() * prescale for x in inputs]) * postscale
    scale = sum(float(x.double().abs().max()) * prescale for x in inputs) if inputs[0].numel() else 0
    levels = int(math.log2(len(inputs)))
    wire = ROUNDOFF[torch.float64] if actual.dtype == torch.float64 else ROUNDOFF[torch.float32]
    atol = (4 * (levels + 1) * wire + 2 * ROUNDOFF[actual.dtype]) * scale * abs(postscale)
    assert actual.dtype == inputs[0].dtype, what
    torch.testing.assert_close(actual.double(), expected, rtol=0, atol=atol,
                               msg=lambda m: what + ": " + m)


def _skip_unless_pof2():
    if not power_of_two(hvd.size()):
        pytest.skip("Adasum runs on a power-of-two number of ranks (the refusal is tested below)")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
def test_adasum_matches_the_tree_reference(dtype):
    _skip_unless_pof2()
    n = hvd.size()
    for count in (1, n + 1, 1000):
        key = ("adasum", count)
        inputs = all_rank_values(key, dtype, (count,))
        mine = inputs[hvd.rank()].clone()
        out = hvd.allreduce(mine, op=hvd.Adasum, name="adasum.%s.%d" % (dtype_id(dtype), count))
        check_adasum(out, inputs, "%s count %d" % (dtype, count))
        assert torch.equal(mine, inputs[hvd.rank()]), "the input was modified"
        inplace = inputs[hvd.rank()].clone()
        hvd.allreduce_(inplace, op=hvd.Adasum, prescale_factor=0.5, postscale_factor=4.0,
                       name="adasum_.%s.%d" % (dtype_id(dtype), count))
        check_adasum(inplace, inputs, "%s count %d in place, scaled" % (dtype, count), 0.5, 4.0)


def test_grouped_adasum_keeps_each_tensor_apart():
    _skip_unless_pof2()
    shapes = [(7,), (1,), (13, 10)]
    all_inputs = [all_rank_values(("adasum-group", i), torch.float32, s)
                  for i, s in enumerate(shapes)]
    outs = hvd.grouped_allreduce([inp[hvd.rank()] for inp in all_inputs], op=hvd.Adasum,
                                 name="adasum-group")
    for i, (out, inputs) in enumerate(zip(outs, all_inputs)):
        check_adasum(out, inputs, "group member %d" % i)


def test_orthogonal_gradients_add_and_parallel_ones_average():
    _skip_unless_pof2()
    n, rank = hvd.size(), hvd.rank()
    # Horovod's test_orthogonal: the columns of an orthogonal matrix; Adasum is their sum.
    g = torch.Generator().manual_seed(2)
    q, _ = torch.linalg.qr(torch.randn(20 * n - 17, n, generator=g, dtype=torch.float64))
    out = hvd.allreduce(q[:, rank].float(), op=hvd.Adasum, name="adasum-orthogonal")
    torch.testing.assert_close(out.double(), q.float().double().sum(1), rtol=0, atol=1e-5)
    # Horovod's test_parallel: r_i * a; Adasum is their mean times a.
    a = torch.randn(2 * n + 1, generator=g, dtype=torch.float64)
    r = torch.randn(n, generator=g, dtype=torch.float64)
    cols = [(r[i] * a).float() for i in range(n)]
    out = hvd.allreduce(cols[rank], op=hvd.Adasum, name="adasum-parallel")
    expected = sum(c.double() for c in cols) / n
    torch.testing.assert_close(out.double(), expected, rtol=0, atol=1e-5)


def test_adasum_of_integers_is_refused():
    with pytest.raises(ValueError) as info:
        hvd.allreduce(torch.ones(4, dtype=torch.int32), op=hvd.Adasum, name="adasum-int")
    assert "floating-point" in str(info.value), str(info.value)


def test_adasum_at_other_rank_counts_names_the_count_on_every_rank():
    n = hvd.size()
    if power_of_two(n):
        pytest.skip("this rank count is a power of two")
    with pytest.raises(RuntimeError) as info:
        hvd.allreduce(torch.ones(8), op=hvd.Adasum, name="adasum-refused")
    assert isinstance(info.value, hvd.HorovodInternalError), type(info.value)
    assert "power-of-two" in str(info.value) and "has %d" % n in str(info.value), str(info.value)
    # Nothing is left waiting: the next operation runs.
    out = hvd.allreduce(torch.ones(8), op=hvd.Sum, name="adasum-refused.next")
    assert torch.equal(out, torch.full((8,), float(n)))
