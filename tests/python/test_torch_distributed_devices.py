"""kolo's torch.distributed backend on each kind of tensor it takes, CPU and CUDA: all_reduce of
every op, broadcast, all_gather_into_tensor, reduce_scatter_tensor, all_to_all_single, and DDP
on a model on that device against DDP on a gloo group of CPU copies, all against references
computed on the CPU from every rank's known inputs, with outputs on the input's device.

The same test bodies run on CPU tensors everywhere, so the tests themselves are checked where
there is no GPU; the CUDA cases skip where torch sees no GPU or where ranks would share one
(NCCL needs a GPU per rank), or where kolo was built without CUDA; every rank skips alike.
On a machine with a GPU, scripts/gpu_check.sh runs this file at one rank, as a process of its
own: there the default group is made over TCP on this host with the rank and size kolo has,
since no launcher set torch's RANK and WORLD_SIZE.
"""
import datetime
import os

import pytest
import torch
import torch.distributed as dist

import kolo.torch as hvd
import kolo.torch.distributed  # noqa: F401 - registers the backend
from kolo.local_launch import free_port
from kolo_reference import (all_rank_values, assert_matches, dtype_id, rank_values,
                            reference_allreduce)
from torch_dist_names import OPS, all_gather_into_tensor, reduce_scatter_tensor


@pytest.fixture(scope="module", autouse=True)
def kolo_group():
    if not dist.is_initialized():
        timeout = datetime.timedelta(seconds=60)
        if hvd.size() == 1 and "RANK" not in os.environ:
            dist.init_process_group("kolo", init_method="tcp://127.0.0.1:%d" % free_port(),
                                    rank=hvd.rank(), world_size=hvd.size(), timeout=timeout)
        else:
            dist.init_process_group("kolo", timeout=timeout)
    assert dist.get_backend() == "kolo"
    yield dist.group.WORLD


@pytest.fixture(scope="module")
def gloo_group(kolo_group):
    return dist.new_group(backend="gloo")


def _why_no_cuda():
    """Why this rank cannot run the CUDA cases, or None."""
    if not hvd.cuda_built():
        return "kolo was built without CUDA"
    if not torch.cuda.is_available():
        return "no CUDA device"
    if hvd.local_size() > torch.cuda.device_count():
        return "%d ranks on this node, %d GPUs: NCCL needs a GPU per rank" % (
            hvd.local_size(), torch.cuda.device_count())
    return None


@pytest.fixture(params=["cpu", "cuda"])
def device(request):
    if request.param == "cuda":
        why = _why_no_cuda()
        # Every rank must skip alike (a per-rank CUDA_VISIBLE_DEVICES, nodes with other GPU
        # counts): the ranks agree first.
        can = hvd.allreduce(torch.tensor([0 if why else 1], dtype=torch.int32), op=hvd.Min,
                            name="tdd_cuda_ok")
        if int(can[0]) == 0:
            pytest.skip(why or "a peer rank cannot run the CUDA cases")
        return torch.device("cuda", hvd.local_rank() % torch.cuda.device_count())
    return torch.device("cpu")


# Integer Average is refused by torch's backends and by kolo on CUDA; Product of float16 on
# several ranks leaves the reference's tolerance, so float16 takes the other ops.
@pytest.mark.parametrize("dtype, op", [
    (d, o) for d in (torch.float32, torch.float64, torch.float16, torch.int32)
    for o in ("Sum", "Min", "Max", "Product", "Average")
    if not (o == "Average" and d == torch.int32) and not (o == "Product" and d == torch.float16)],
    ids=lambda v: dtype_id(v) if isinstance(v, torch.dtype) else v)
def test_all_reduce_matches_reference(device, dtype, op):
    inputs = all_rank_values(("tdd_ar", op), dtype, (37, 3), op)
    t = inputs[hvd.rank()].to(device, copy=True)
    dist.all_reduce(t, op=OPS[op])
    assert t.device == device
    assert_matches(t.cpu(), reference_allreduce(inputs, op), "all_reduce %s on %s" % (op, device))


def test_async_all_reduce_future_on_the_device(device):
    inputs = all_rank_values("tdd_fut", torch.float32, (1000,))
    t = inputs[hvd.rank()].to(device, copy=True)
    work = dist.all_reduce(t, async_op=True)
    doubled = work.get_future().then(lambda fut: fut.value()[0] * 2)
    assert work.wait()
    expected = reference_allreduce(inputs, "Sum")
    assert_matches(t.cpu(), expected, "async all_reduce on %s" % device)
    assert_matches(doubled.wait().cpu(), expected * 2, "the future's continuation")


def test_broadcast_from_each_root(device):
    for root in range(hvd.size()):
        inputs = all_rank_values(("tdd_bc", root), torch.float32, (5, 4))
        t = inputs[hvd.rank()].to(device, copy=True)
        dist.broadcast(t, src=root)
        assert t.device == device
        assert torch.equal(t.cpu(), inputs[root]), "root %d on %s" % (root, device)


def test_all_gather_into_tensor(device):
    inputs = all_rank_values("tdd_ag", torch.float32, (3, 5))
    out = torch.zeros(hvd.size() * 3, 5, device=device)
    all_gather_into_tensor(out, inputs[hvd.rank()].to(device, copy=True))
    assert torch.equal(out.cpu(), torch.cat(inputs))
    outs = [torch.zeros(3, 5, device=device) for _ in range(hvd.size())]
    dist.all_gather(outs, inputs[hvd.rank()].to(device, copy=True))
    for r, o in enumerate(outs):
        assert torch.equal(o.cpu(), inputs[r]), "all_gather's part from rank %d" % r


@pytest.mark.parametrize("op", ["Sum", "Max", "Average"])
def test_reduce_scatter_tensor(device, op):
    n, me = hvd.size(), hvd.rank()
    # inputs[r][q]: rank r's contribution to rank q's output.
    inputs = [[rank_values(("tdd_rs", op, q), r, torch.float32, (4, 3), op, n) for q in range(n)]
              for r in range(n)]
    out = torch.zeros(4, 3, device=device)
    reduce_scatter_tensor(out, torch.cat(inputs[me]).to(device), op=OPS[op])
    expected = reference_allreduce([inputs[r][me] for r in range(n)], op)
    assert_matches(out.cpu(), expected, "reduce_scatter_tensor %s on %s" % (op, device))


def test_all_to_all_single_with_uneven_splits(device):
    n, me = hvd.size(), hvd.rank()
    # rank r sends r + q + 1 rows of 2 to rank q, each row holding (r, q).
    send = torch.cat([torch.tensor([[float(me), float(q)]] * (me + q + 1)) for q in range(n)])
    recv_rows = [r + me + 1 for r in range(n)]
    out = torch.zeros(sum(recv_rows), 2, device=device)
    dist.all_to_all_single(out, send.to(device, copy=True), output_split_sizes=recv_rows,
                           input_split_sizes=[me + q + 1 for q in range(n)])
    expected = torch.cat([torch.tensor([[float(r), float(me)]] * (r + me + 1))
                          for r in range(n)])
    assert torch.equal(out.cpu(), expected)


def _train(device, group, steps=5, seed=11):
    """SGD steps of a fresh MLP on `device` under DDP on `group`; its losses and parameters."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4)).to(device)
    ids = [device.index] if device.type == "cuda" else None
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=ids, process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(seed + hvd.rank())
    losses = []
    for _ in range(steps):
        x = torch.randn(8, 16, generator=g).to(device)
        y = torch.randint(0, 4, (8,), generator=g).to(device)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().cpu() for p in model.parameters()]


def test_ddp_on_the_device_matches_ddp_on_gloo(device, gloo_group):
    kolo_losses, kolo_params = _train(device, None)
    gloo_losses, gloo_params = _train(torch.device("cpu"), gloo_group)
    # The GPU's kernels round differently from the CPU's: float tolerance, not bit equality.
    assert kolo_losses == pytest.approx(gloo_losses, rel=1e-4, abs=1e-5)
    for a, b in zip(kolo_params, gloo_params):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-5)
