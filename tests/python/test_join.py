"""join (Horovod's) with uneven batches: rank r works for (r+1)*k steps, then joins. Every step's
allreduce result is checked against the reference over the ranks still active plus the joined
ranks' identities (zeros for Sum/Average, which still divides by size(); +inf/max for Min,
-inf/lowest for Max); join returns the last rank to join on every rank; ops other than allreduce
that need a joined rank raise on their submitters; DistributedOptimizer steps on the active
ranks average their gradients with the joined ranks' zeros.
"""
import pytest
import torch

import kolo.torch as hvd
from kolo_reference import assert_matches, rank_values, reference_allreduce

K = 2
CASES = [(torch.float32, "Sum"), (torch.float32, "Average"), (torch.float32, "Min"),
         (torch.float32, "Max"), (torch.int32, "Sum"), (torch.int32, "Min"),
         (torch.float64, "Average"), (torch.float16, "Sum")]


def identity(dtype, shape, op):
    if op in ("Sum", "Average"):
        return torch.zeros(shape, dtype=dtype)
    if dtype.is_floating_point:
        return torch.full(shape, float("inf") if op == "Min" else float("-inf"), dtype=dtype)
    info = torch.iinfo(dtype)
    return torch.full(shape, info.max if op == "Min" else info.min, dtype=dtype)


def run_uneven(steps_of, tag):
    n, me = hvd.size(), hvd.rank()
    for step in range(steps_of(me)):
        handles = []
        for dtype, op in CASES:
            key = ("join", tag, str(dtype), op, step)
            mine = rank_values(key, me, dtype, (5, 3), op, n)
            handles.append(hvd.allreduce_async(mine, name="join.%s.%s" % (dtype, op),
                                               op=getattr(hvd, op)))
        for (dtype, op), h in zip(CASES, handles):
            key = ("join", tag, str(dtype), op, step)
            inputs = [rank_values(key, q, dtype, (5, 3), op, n) if step < steps_of(q)
                      else identity(dtype, (5, 3), op) for q in range(n)]
            assert_matches(hvd.synchronize(h), reference_allreduce(inputs, op),
                           "%s %s step %d" % (dtype, op, step))
    return hvd.join()


def test_join_with_uneven_batches():
    assert run_uneven(lambda q: (q + 1) * K, "up") == hvd.size() - 1
    # join again, the other way round: rank 0 works longest and joins last.
    assert run_uneven(lambda q: (hvd.size() - q) * K, "down") == 0
    # back to normal: everybody's data, named and unnamed (join resynchronises the handle
    # counters that unnamed operations are named after, which the uneven steps set apart)
    out = hvd.allreduce(torch.ones(3), name="join.after", op=hvd.Sum)
    assert torch.equal(out, torch.full((3,), float(hvd.size())))
    out = hvd.allreduce(torch.ones(3), op=hvd.Sum)
    assert torch.equal(out, torch.full((3,), float(hvd.size())))


def test_join_other_ops_raise_on_the_submitters():
    n, me = hvd.size(), hvd.rank()
    joiner = n - 1
    if me != joiner:
        t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
        suffix = "rank %d has joined and cannot take part in" % joiner
        with pytest.raises(hvd.HorovodInternalError, match=suffix + " allgather"):
            hvd.allgather(t, name="join.gather")
        with pytest.raises(hvd.HorovodInternalError, match=suffix + " broadcast"):
            hvd.broadcast(t, root_rank=0, name="join.bcast")
        hvd.barrier()  # barriers take the joined rank along
    last = hvd.join()
    lasts = hvd.allgather_object(last)
    assert lasts == [lasts[0]] * n
    assert lasts[0] != joiner


def test_join_device_must_be_a_cuda_ordinal_or_minus_one():
    with pytest.raises(ValueError, match="CUDA device ordinal"):
        hvd.join(device=-2)
    with pytest.raises(ValueError, match="CUDA device ordinal"):
        hvd.join(device="cuda")


def test_join_with_a_device_is_still_a_join():
    # Horovod's join(device): the device is only where this rank would make its zeros for the
    # peers' CUDA all-reduces; with none pending it is never touched (so this runs without a GPU).
    last = hvd.join(device=0)
    assert hvd.allgather_object(last) == [last] * hvd.size()


def _grads(weight, bias, x, y):
    w = weight.detach().clone().requires_grad_()
    b = bias.detach().clone().requires_grad_()
    loss = ((x @ w.t() + b - y) ** 2).mean()
    return torch.autograd.grad(loss, [w, b])


def test_join_distributed_optimizer():
    n, me = hvd.size(), hvd.rank()
    torch.manual_seed(7)
    model = torch.nn.Linear(4, 2).double()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())

    def steps_of(q):
        return (q + 1) * K

    def batch(q, s):
        g = torch.Generator().manual_seed(1000 * q + s)
        return (torch.randn(3, 4, generator=g, dtype=torch.float64),
                torch.randn(3, 2, generator=g, dtype=torch.float64))

    for s in range(steps_of(me)):
        # Every active rank holds the same parameters: the expected average over size() ranks of
        # the active ranks' gradients, the joined ranks contributing zeros.
        exp_w = torch.zeros_like(model.weight)
        exp_b = torch.zeros_like(model.bias)
        for q in range(n):
            if s < steps_of(q):
                gw, gb = _grads(model.weight, model.bias, *batch(q, s))
                exp_w += gw
                exp_b += gb
        opt.zero_grad()
        x, y = batch(me, s)
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
        torch.testing.assert_close(model.weight.grad, exp_w / n)
        torch.testing.assert_close(model.bias.grad, exp_b / n)
    assert hvd.join() == n - 1
