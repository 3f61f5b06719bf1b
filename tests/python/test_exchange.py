"""reducescatter, alltoall, barrier and SyncBatchNorm, against references from every rank's
known inputs:
  reducescatter: rank r gets rows [start_r, start_r + share_r) of the allreduce reference, the
    first n % size ranks one row more (Horovod's split); gradient = Horovod's,
    prescale * postscale * allgather(grad_out), times size for Sum;
  alltoall: rank r gets, in rank order, the rows q sent to r; gradient = alltoall(grad_out) back
    with the received splits;
  SyncBatchNorm on a rank's batch = torch's BatchNorm on the concatenation of all ranks' batches
    (forward, input gradient, running statistics).
"""
import pytest
import torch

import kolo.torch as hvd
from kolo_reference import (ALL_DTYPES, assert_matches, dtype_id, rank_values,
                            reference_allreduce)


def shares(rows):
    n = hvd.size()
    return [rows // n + (1 if q < rows % n else 0) for q in range(n)]


def my_rows(rows):
    s = shares(rows)
    r = hvd.rank()
    return sum(s[:r]), s[r]


@pytest.mark.parametrize("dtype", [d for d in ALL_DTYPES if d != torch.bool], ids=dtype_id)
@pytest.mark.parametrize("op", ["Sum", "Average"])
@pytest.mark.parametrize("rows", [1, 5, 7])
def test_reducescatter_matches_reference(dtype, op, rows):
    n = hvd.size()
    key = ("rs", dtype_id(dtype), op, rows)
    inputs = [rank_values(key, r, dtype, (rows, 3), "Sum", n) for r in range(n)]
    mine = inputs[hvd.rank()].clone()
    out = hvd.reducescatter(mine, op=getattr(hvd, op))
    start, count = my_rows(rows)
    assert_matches(out, reference_allreduce(inputs, op)[start:start + count], "reducescatter")
    assert torch.equal(mine, inputs[hvd.rank()]), "the input must not be modified"


def test_reducescatter_scale_factors_and_async():
    n = hvd.size()
    inputs = [rank_values("rs-scale", r, torch.float64, (6, 2), "Sum", n) for r in range(n)]
    handle = hvd.reducescatter_async(inputs[hvd.rank()], op=hvd.Sum, prescale_factor=0.5,
                                     postscale_factor=3.0)
    out = hvd.synchronize(handle)
    start, count = my_rows(6)
    assert_matches(out, reference_allreduce(inputs, "Sum", 0.5, 3.0)[start:start + count])


def test_grouped_reducescatter():
    n = hvd.size()
    a = [rank_values("grs-a", r, torch.float32, (4, 2), "Sum", n) for r in range(n)]
    b = [rank_values("grs-b", r, torch.int32, (3,), "Sum", n) for r in range(n)]
    out_a, out_b = hvd.grouped_reducescatter([a[hvd.rank()], b[hvd.rank()]], op=hvd.Sum)
    sa, ca = my_rows(4)
    sb, cb = my_rows(3)
    assert_matches(out_a, reference_allreduce(a, "Sum")[sa:sa + ca])
    assert_matches(out_b, reference_allreduce(b, "Sum")[sb:sb + cb])


def horovod_reducescatter_grad(grads, op, prescale=1.0, postscale=1.0):
    """Horovod 0.28.1's reducescatter gradient on every rank, from every rank's output gradient
    (float64): the gradients gathered in rank order, times prescale * postscale, times the
    number of ranks for Sum. (The adjoint would be that divided by the number of ranks.)"""
    scale = prescale * postscale * (len(grads) if op == "Sum" else 1)
    return torch.cat([g.double() for g in grads]) * scale


@pytest.mark.parametrize("op,prescale,postscale", [("Sum", 1.0, 1.0), ("Average", 1.0, 1.0),
                                                   ("Average", 2.0, 1.0), ("Sum", 0.5, 3.0)])
def test_reducescatter_gradient(op, prescale, postscale):
    n = hvd.size()
    rows = 5
    x = rank_values(("rs-grad", op), hvd.rank(), torch.float64, (rows, 2), "Sum", n)
    x.requires_grad_(True)
    y = hvd.reducescatter(x, op=getattr(hvd, op), prescale_factor=prescale,
                          postscale_factor=postscale)
    # rank q weighs its share by w_q: dL/dy on rank q is w_q
    ws = [rank_values(("rs-grad-w", op), q, torch.float64, (s, 2))
          for q, s in enumerate(shares(rows))]
    (y * ws[hvd.rank()]).sum().backward()
    assert_matches(x.grad, horovod_reducescatter_grad(ws, op, prescale, postscale), "gradient")


@pytest.mark.parametrize("op", ["Sum", "Average"])
def test_grouped_reducescatter_gradient(op):
    n = hvd.size()
    shapes = [(5, 2), (n + 1,), (2 * n, 3)]
    xs = [rank_values(("grs-grad", op, i), hvd.rank(), torch.float64, shape, "Sum", n)
          .requires_grad_(True) for i, shape in enumerate(shapes)]
    ys = hvd.grouped_reducescatter(xs, name="grs-grad.%s" % op, op=getattr(hvd, op),
                                   prescale_factor=0.5, postscale_factor=3.0)
    assert isinstance(ys, list) and len(ys) == len(xs)
    ws = [[rank_values(("grs-grad-w", op, i), q, torch.float64, (s,) + shape[1:])
           for q, s in enumerate(shares(shape[0]))] for i, shape in enumerate(shapes)]
    sum(((y * w[hvd.rank()]).sum() for y, w in zip(ys, ws))).backward()
    for i, (x, w) in enumerate(zip(xs, ws)):
        assert_matches(x.grad, horovod_reducescatter_grad(w, op, 0.5, 3.0), "gradient %d" % i)


def test_grouped_reducescatter_is_one_group():
    # The ranks group different numbers of tensors: the whole group fails on every rank (no
    # member completes, none waits for the missing one), and the name works again afterwards.
    n, r = hvd.size(), hvd.rank()
    tensors = [torch.ones(n, 2), torch.ones(2 * n)] + ([torch.ones(n)] if r == 0 else [])
    with pytest.raises(hvd.HorovodInternalError):
        hvd.grouped_reducescatter(tensors, name="grs-count", op=hvd.Sum)
    out = hvd.grouped_reducescatter(tensors[:2], name="grs-count", op=hvd.Sum)
    assert_matches(out[0], torch.full((1, 2), float(n)), "next group [0]")
    assert_matches(out[1], torch.full((2,), float(n)), "next group [1]")


@pytest.mark.parametrize("op", ["Adasum", "Min", "Max", "Product"])
def test_reducescatter_refuses_other_ops_as_horovod(op):
    # Horovod raises a RuntimeError; kolo's ValueError stays one too.
    for call in (lambda: hvd.reducescatter(torch.zeros(4), op=getattr(hvd, op)),
                 lambda: hvd.grouped_reducescatter([torch.zeros(4), torch.zeros(2)],
                                                   op=getattr(hvd, op))):
        with pytest.raises(RuntimeError) as info:
            call()
        assert isinstance(info.value, ValueError), type(info.value)
        assert isinstance(info.value, hvd.HorovodInternalError), type(info.value)
        assert op in str(info.value), str(info.value)


def test_reducescatter_op_refused_on_one_rank_fails_the_others():
    # Only the last rank asks for Min: the others fail too instead of waiting for it.
    last = hvd.size() - 1
    op = hvd.Min if hvd.rank() == last else hvd.Sum
    with pytest.raises(RuntimeError) as info:
        hvd.reducescatter(torch.ones(hvd.size(), 2), name="rs-op-refused", op=op)
    if hvd.rank() != last:
        assert "rank %d refused it" % last in str(info.value), str(info.value)
    # (another name: the last rank cannot tell when the others have seen its refusal)
    out = hvd.reducescatter(torch.ones(hvd.size(), 2), name="rs-op-refused.next", op=hvd.Sum)
    assert_matches(out, torch.full((1, 2), float(hvd.size())), "next op")


def test_reducescatter_refuses_min_and_shape_mismatch():
    with pytest.raises(ValueError):
        hvd.reducescatter(torch.zeros(4), op=hvd.Min)
    rows = 3 + hvd.rank()  # every rank a different shape
    with pytest.raises(hvd.HorovodInternalError) as info:
        hvd.reducescatter(torch.zeros(rows, 2), name="rs-mismatch", op=hvd.Sum)
    message = str(info.value)
    assert "rs-mismatch" in message and "shape" in message and "rank 0" in message
    out = hvd.reducescatter(torch.ones(hvd.size(), 2), name="rs-mismatch", op=hvd.Sum)
    assert_matches(out, torch.full((1, 2), float(hvd.size())), "next op")


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=dtype_id)
def test_alltoall_with_splits(dtype):
    n, r = hvd.size(), hvd.rank()

    def sent(q_from, q_to):  # rows q_from sends to q_to: 0, 1, 2, ... (zero rows included)
        return (q_from + 2 * q_to) % 3

    def rows(q_from, q_to):
        return rank_values(("a2a", q_from, q_to), q_from, dtype, (sent(q_from, q_to), 2))

    splits = [sent(r, q) for q in range(n)]
    tensor = torch.cat([rows(r, q) for q in range(n)])
    out, received = hvd.alltoall(tensor, splits=splits)
    assert received.tolist() == [sent(q, r) for q in range(n)]
    assert_matches(out, torch.cat([rows(q, r) for q in range(n)]), "alltoall")


def test_alltoall_equal_split_async_and_gradient():
    n, r = hvd.size(), hvd.rank()
    x = torch.arange(2 * n, dtype=torch.float64).reshape(2 * n, 1) + 100 * r
    out, received = hvd.synchronize(hvd.alltoall_async(x))
    assert received.tolist() == [2] * n
    expected = torch.cat([torch.arange(2 * r, 2 * r + 2, dtype=torch.float64).reshape(2, 1)
                          + 100 * q for q in range(n)])
    assert_matches(out, expected)
    # Gradient: rank q weighs what it received by (q + 1), so every row of x goes to rank
    # row // 2 and comes back weighted by that rank + 1.
    x.requires_grad_(True)
    y = hvd.alltoall(x)
    (y * (r + 1)).sum().backward()
    want = torch.tensor([[float(i // 2 + 1)] for i in range(2 * n)], dtype=torch.float64)
    assert_matches(x.grad, want, "gradient")


def test_alltoall_errors():
    n = hvd.size()
    with pytest.raises(ValueError):
        hvd.alltoall(torch.zeros(n), splits=[1] * (n + 1))
    # splits of a non-integer dtype: ValueError, as Horovod's (which wants int32)
    for dtype in (torch.float32, torch.float64, torch.bool):
        with pytest.raises(ValueError, match="splits"):
            hvd.alltoall(torch.zeros(n), splits=torch.ones(n, dtype=dtype))
    # trailing dimensions differ across ranks: every rank fails, then the name works again
    with pytest.raises(hvd.HorovodInternalError) as info:
        hvd.alltoall(torch.zeros(n, 1 + hvd.rank()), name="a2a-mismatch")
    assert "a2a-mismatch" in str(info.value)
    out = hvd.alltoall(torch.ones(n, 2), name="a2a-mismatch")
    assert_matches(out, torch.ones(n, 2), "next op")


def test_alltoall_splits_refused_on_one_rank_fail_the_others():
    # Only the last rank gives splits kolo.torch refuses (too few entries, then a float tensor):
    # the others fail with its reason instead of waiting for it.
    n, last = hvd.size(), hvd.size() - 1
    for k, bad in enumerate(([n], torch.ones(n))):
        splits = bad if hvd.rank() == last else [1] * n
        with pytest.raises(ValueError if hvd.rank() == last else RuntimeError) as info:
            hvd.alltoall(torch.zeros(n), splits=splits, name="a2a-refused.%d" % k)
        if hvd.rank() != last:
            assert "rank %d refused it" % last in str(info.value), str(info.value)
            assert "splits" in str(info.value), str(info.value)
    # (another name: the last rank cannot tell when the others have seen its refusal)
    out = hvd.alltoall(torch.full((n,), float(hvd.rank())), name="a2a-refused.next")
    assert_matches(out, torch.arange(n, dtype=torch.float32), "next op")


def test_barrier_orders_with_submitted_ops():
    t = torch.full((3,), float(hvd.rank()))
    handle = hvd.allreduce_async(t, op=hvd.Sum, name="before-barrier")
    hvd.barrier()
    hvd.barrier()
    assert_matches(hvd.synchronize(handle),
                   torch.full((3,), float(sum(range(hvd.size())))))


@pytest.mark.parametrize("shape", [(4, 3), (4, 3, 5, 5), (2, 3, 7)])
def test_sync_batch_norm_equals_batch_norm_on_the_global_batch(shape):
    n, r = hvd.size(), hvd.rank()
    batches = [rank_values(("sbn",) + shape, q, torch.float64, shape, "Sum", n)
               for q in range(n)]
    torch.manual_seed(3)
    sbn = hvd.SyncBatchNorm(shape[1]).double()
    reference = {2: torch.nn.BatchNorm1d, 3: torch.nn.BatchNorm1d,
                 4: torch.nn.BatchNorm2d}[len(shape)](shape[1]).double()
    with torch.no_grad():
        sbn.weight.uniform_(0.5, 1.5)
        sbn.bias.uniform_(-1, 1)
        reference.weight.copy_(sbn.weight)
        reference.bias.copy_(sbn.bias)
    x = batches[r].clone().requires_grad_(True)
    y = sbn(x)
    (y * y.detach().cos()).sum().backward()
    x_all = torch.cat(batches).requires_grad_(True)
    y_all = reference(x_all)
    (y_all * y_all.detach().cos()).sum().backward()
    rows = slice(shape[0] * r, shape[0] * (r + 1))
    assert_matches(y.detach(), y_all.detach()[rows], "forward")
    assert_matches(x.grad, x_all.grad[rows], "input gradient")
    assert_matches(sbn.running_mean, reference.running_mean, "running mean")
    assert_matches(sbn.running_var, reference.running_var, "running var")
    # the parameters' gradients are per rank (DistributedOptimizer averages them); their sum
    # over ranks is the global batch's
    summed = hvd.allreduce(sbn.weight.grad, op=hvd.Sum)
    assert_matches(summed, reference.weight.grad, "weight gradient summed over ranks")
    sbn.eval()
    reference.eval()
    assert_matches(sbn(batches[r]).detach(), reference(batches[r]).detach(), "eval mode")
