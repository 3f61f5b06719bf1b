"""Gradients through hvd.allreduce, hvd.allgather and hvd.broadcast, with Horovod 0.28's
backward (horovod/torch/mpi_ops.py):
  allreduce: grad_in = allreduce(grad_out) with the forward's op, prescale and postscale;
  allgather: grad_in = allreduce(grad_out, Average)[offset_r : offset_r + rows_r];
  broadcast: grad_in = allreduce(grad_out, Average) on the root, zeros elsewhere.
Each rank's loss is sum(output * w_r) with rank-unique weights w_r, so grad_out = w_r and the
expected gradients are computed from every rank's w in float64."""
import pytest
import torch

import kolo.torch as hvd
from kolo_reference import assert_matches, rank_values, reference_allreduce


def weights(key, shape):
    n = hvd.size()
    return [rank_values(("w",) + key, r, torch.float64, shape, "Sum", n) for r in range(n)]


@pytest.mark.parametrize("op,prescale,postscale", [("Average", 1.0, 1.0), ("Sum", 1.0, 1.0),
                                                   ("Sum", 2.0, 0.5), ("Average", 0.5, 3.0)])
def test_allreduce_gradient(op, prescale, postscale):
    n = hvd.size()
    key = ("ar-grad", op, prescale, postscale)
    inputs = [rank_values(key, r, torch.float64, (2, 3), "Sum", n) for r in range(n)]
    ws = weights(key, (2, 3))
    x = inputs[hvd.rank()].clone().requires_grad_(True)
    y = hvd.allreduce(x, op=getattr(hvd, op), prescale_factor=prescale,
                      postscale_factor=postscale)
    assert y.requires_grad
    assert_matches(y.detach(), reference_allreduce(inputs, op, prescale, postscale), "forward")
    (y * ws[hvd.rank()]).sum().backward()
    assert_matches(x.grad, reference_allreduce(ws, op, prescale, postscale), "gradient")


def test_allreduce_gradient_through_a_model():
    # A leaf used before and after the all-reduce: the chain rule must compose with the hook.
    n = hvd.size()
    inputs = [rank_values("ar-chain", r, torch.float64, (4,), "Sum", n) for r in range(n)]
    x = inputs[hvd.rank()].clone().requires_grad_(True)
    y = hvd.allreduce(x * 3.0, op=hvd.Sum)
    loss = (y * y).sum() + x.sum()
    loss.backward()
    # d/dx_r: 3 * allreduce_sum(2 * y) + 1, where y = 3 * sum_s x_s on every rank.
    y_ref = 3.0 * torch.stack(inputs).sum(0)
    expected = 3.0 * (n * 2.0 * y_ref) + 1.0
    assert_matches(x.grad, expected, "chained gradient")


@pytest.mark.parametrize("rows", ["r+1", "r"])
def test_allgather_gradient(rows):
    n = hvd.size()
    rows_of = (lambda r: r + 1) if rows == "r+1" else (lambda r: r)
    inputs = [rank_values(("ag-grad", rows), r, torch.float64, (rows_of(r), 3), "Sum", n)
              for r in range(n)]
    total = sum(rows_of(r) for r in range(n))
    ws = weights(("ag-grad", rows), (total, 3))
    x = inputs[hvd.rank()].clone().requires_grad_(True)
    y = hvd.allgather(x)
    assert_matches(y.detach(), torch.cat(inputs), "forward")
    (y * ws[hvd.rank()]).sum().backward()
    offset = sum(rows_of(r) for r in range(hvd.rank()))
    mean_w = reference_allreduce(ws, "Average")
    assert_matches(x.grad, mean_w[offset:offset + rows_of(hvd.rank())], "gradient")


def test_broadcast_gradient_from_every_root():
    n = hvd.size()
    for root in range(n):
        inputs = [rank_values(("bc-grad", root), r, torch.float64, (5,), "Sum", n)
                  for r in range(n)]
        ws = weights(("bc-grad", root), (5,))
        x = inputs[hvd.rank()].clone().requires_grad_(True)
        y = hvd.broadcast(x, root_rank=root)
        assert_matches(y.detach(), inputs[root], "forward from root %d" % root)
        (y * ws[hvd.rank()]).sum().backward()
        if hvd.rank() == root:
            expected = reference_allreduce(ws, "Average")
        else:
            expected = torch.zeros(5, dtype=torch.float64)
        assert_matches(x.grad, expected, "gradient, root %d" % root)
