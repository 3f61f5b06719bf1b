"""kolo as a torch.distributed backend (kolo.torch.distributed), against references from every
rank's known inputs, and DDP on "kolo" against DDP on a gloo group of the same ranks.

The default group is made once for the module (``dist.init_process_group("kolo")``), on top of
the kolo that conftest.py started, as a script that called hvd.init() first would.
"""
import datetime

import pytest
import torch
import torch.distributed as dist

import kolo.torch as hvd
import kolo.torch.distributed  # noqa: F401 - registers the backend
from kolo.torch.distributed.names import PERIOD
from kolo_reference import (
    all_rank_values,
    assert_matches,
    dtype_id,
    rank_values,
    reference_allreduce,
)
from torch_dist_names import OPS, DistBackendError, all_gather_into_tensor, reduce_scatter_tensor


@pytest.fixture(scope="module", autouse=True)
def kolo_group():
    if not dist.is_initialized():
        dist.init_process_group("kolo", timeout=datetime.timedelta(seconds=60))
    yield dist.group.WORLD


def test_group_matches_kolo():
    assert dist.get_backend() == "kolo"
    assert (dist.get_rank(), dist.get_world_size()) == (hvd.rank(), hvd.size())


# AVG of integers is left out: torch's backends refuse it too.
@pytest.mark.parametrize("dtype, op", [
    (d, o) for d in (torch.float32, torch.float64, torch.int32, torch.bfloat16)
    for o in ("Sum", "Min", "Max", "Product", "Average")
    if not (o == "Average" and d == torch.int32)],
    ids=lambda v: dtype_id(v) if isinstance(v, torch.dtype) else v)
def test_all_reduce_matches_reference(dtype, op):
    inputs = all_rank_values(("tdar", op), dtype, (5, 3), op)
    t = inputs[hvd.rank()].clone()
    dist.all_reduce(t, op=OPS[op])
    assert_matches(t, reference_allreduce(inputs, op), "all_reduce %s" % op)


def test_all_reduce_of_a_non_contiguous_tensor_writes_the_callers_tensor():
    inputs = all_rank_values("tdnc", torch.float32, (4, 6))
    base = inputs[hvd.rank()].clone()
    view = base.t()  # not contiguous
    dist.all_reduce(view)
    assert_matches(base, reference_allreduce(inputs, "Sum"), "all_reduce of a transposed view")


def test_async_work_wait_and_future():
    inputs = all_rank_values("tdwf", torch.float64, (7,))
    t = inputs[hvd.rank()].clone()
    work = dist.all_reduce(t, async_op=True)
    doubled = work.get_future().then(lambda fut: fut.value()[0] * 2)
    assert work.wait()
    assert work.is_completed()
    expected = reference_allreduce(inputs, "Sum")
    assert_matches(t, expected, "async all_reduce")
    assert_matches(doubled.wait(), expected * 2, "the future's continuation")


def test_a_work_is_completed_once_its_future_is():
    # The Future completes a moment before the Work's own flag (work.py says why); a caller
    # that waited on the Future must still read the Work as complete and successful.
    for i in range(200):
        t = torch.full((16,), float(i + hvd.rank()))
        work = dist.all_reduce(t, async_op=True)
        work.get_future().wait()
        assert work.is_completed() and work.is_success(), "call %d" % i
        assert work.wait()
        assert t[0].item() == sum(i + r for r in range(hvd.size())), "call %d" % i


def test_repeated_calls_reuse_names_and_stay_correct():
    # More calls of one signature than PERIOD, several in flight at once: each name is reused
    # only after its earlier operation completed, and every result is its own.
    n = 3 * PERIOD
    tensors = [torch.full((4,), float(i + hvd.rank())) for i in range(n)]
    works = [dist.all_reduce(t, async_op=True) for t in tensors]
    for w in works:
        w.wait()
    base = sum(range(hvd.size()))
    for i, t in enumerate(tensors):
        assert t.tolist() == [float(i * hvd.size() + base)] * 4


@pytest.mark.filterwarnings("ignore:torch.distributed.all_reduce_coalesced will be deprecated")
def test_all_reduce_coalesced_matches_reference():
    if not hasattr(dist, "all_reduce_coalesced"):
        pytest.skip("this torch has no all_reduce_coalesced")
    shapes = [(3,), (2, 2), (5,)]
    inputs = [all_rank_values(("tdco", i), torch.float32, s) for i, s in enumerate(shapes)]
    mine = [per_rank[hvd.rank()].clone() for per_rank in inputs]
    dist.all_reduce_coalesced(mine)
    for i, t in enumerate(mine):
        assert_matches(t, reference_allreduce(inputs[i], "Sum"), "all_reduce_coalesced %d" % i)


def test_broadcast_from_each_root():
    for root in range(hvd.size()):
        inputs = all_rank_values(("tdbc", root), torch.float32, (3, 2))
        t = inputs[hvd.rank()].clone()
        dist.broadcast(t, src=root)
        assert torch.equal(t, inputs[root]), "root %d" % root


def test_all_gather_and_all_gather_into_tensor():
    inputs = all_rank_values("tdag", torch.float32, (2, 3))
    outs = [torch.zeros(2, 3) for _ in range(hvd.size())]
    dist.all_gather(outs, inputs[hvd.rank()])
    for r, o in enumerate(outs):
        assert torch.equal(o, inputs[r])
    flat = torch.zeros(hvd.size() * 2, 3)
    all_gather_into_tensor(flat, inputs[hvd.rank()])
    assert torch.equal(flat, torch.cat(inputs))


@pytest.mark.parametrize("op", ["Sum", "Max", "Average"])
def test_reduce_scatter_and_reduce_scatter_tensor(op):
    n = hvd.size()
    # inputs[r][q]: rank r's contribution to rank q's output.
    inputs = [[rank_values(("tdrs", op, q), r, torch.float64, (2, 2), op, n) for q in range(n)]
              for r in range(n)]
    out = torch.zeros(2, 2, dtype=torch.float64)
    dist.reduce_scatter(out, [t.clone() for t in inputs[hvd.rank()]], op=OPS[op])
    expected = reference_allreduce([inputs[r][hvd.rank()] for r in range(n)], op)
    assert_matches(out, expected, "reduce_scatter %s" % op)
    out2 = torch.zeros(2, 2, dtype=torch.float64)
    reduce_scatter_tensor(out2, torch.cat(inputs[hvd.rank()]), op=OPS[op])
    assert_matches(out2, expected, "reduce_scatter_tensor %s" % op)


def test_all_to_all_single_with_uneven_splits():
    n, me = hvd.size(), hvd.rank()
    # rank r sends r + q + 1 rows of 2 to rank q, each row holding (r, q).
    send = [torch.tensor([[float(me), float(q)]] * (me + q + 1)) for q in range(n)]
    recv_rows = [r + me + 1 for r in range(n)]
    out = torch.zeros(sum(recv_rows), 2)
    dist.all_to_all_single(out, torch.cat(send), output_split_sizes=recv_rows,
                           input_split_sizes=[me + q + 1 for q in range(n)])
    expected = torch.cat([torch.tensor([[float(r), float(me)]] * (r + me + 1))
                          for r in range(n)])
    assert torch.equal(out, expected)


def test_all_to_all_of_lists():
    n, me = hvd.size(), hvd.rank()
    send = [torch.full((q + 1,), float(10 * me + q)) for q in range(n)]
    out = [torch.zeros(me + 1) for _ in range(n)]
    dist.all_to_all(out, send)
    for r in range(n):
        assert out[r].tolist() == [float(10 * r + me)] * (me + 1)


def test_reduce_gather_scatter_to_the_last_rank():
    n, me, root = hvd.size(), hvd.rank(), hvd.size() - 1
    inputs = all_rank_values("tdrg", torch.float64, (3,))
    t = inputs[me].clone()
    dist.reduce(t, dst=root)
    if me == root:
        assert_matches(t, reference_allreduce(inputs, "Sum"), "reduce")
    gathered = [torch.zeros(3, dtype=torch.float64) for _ in range(n)] if me == root else None
    dist.gather(inputs[me], gather_list=gathered, dst=root)
    if me == root:
        for r in range(n):
            assert torch.equal(gathered[r], inputs[r])
    out = torch.zeros(2)
    parts = [torch.full((2,), float(q)) for q in range(n)] if me == root else None
    dist.scatter(out, scatter_list=parts, src=root)
    assert out.tolist() == [float(me)] * 2


def test_barrier_and_a_group_of_two_ranks():
    dist.barrier()
    group = dist.new_group([0, 1])
    t = torch.full((3,), float(hvd.rank() + 1))
    if hvd.rank() in (0, 1):
        dist.all_reduce(t, group=group)
        assert t.tolist() == [3.0] * 3
        assert dist.get_rank(group) == hvd.rank()
    else:
        assert t.tolist() == [float(hvd.rank() + 1)] * 3
    dist.barrier()


def test_point_to_point_is_refused_with_the_reason():
    with pytest.raises(DistBackendError, match="point-to-point"):
        dist.send(torch.zeros(1), dst=(hvd.rank() + 1) % hvd.size())


def test_unsupported_reductions_are_refused_by_name():
    with pytest.raises(ValueError, match="BAND"):
        dist.all_reduce(torch.zeros(2, dtype=torch.int32), op=dist.ReduceOp.BAND)
    premul = dist._make_nccl_premul_sum(2.0)
    with pytest.raises(ValueError, match="PREMUL_SUM"):
        dist.all_reduce(torch.zeros(2), op=premul)


def test_a_shape_mismatch_fails_on_every_rank_naming_the_collective():
    # Rank 0's tensor has another shape: the names differ, every rank waits for an operation a
    # peer never submits, and kolo's deadlock check fails it on every rank within seconds.
    shape = (3,) if hvd.rank() == 0 else (4,)
    work = dist.all_reduce(torch.ones(shape), async_op=True)
    with pytest.raises(DistBackendError) as info:
        work.wait()
    message = str(info.value)
    assert "all_reduce" in message or "allreduce" in message
    assert "f32[3]" in message and "f32[4]" in message, message


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def _train(group, steps, seed, hook=None):
    """A few SGD steps of a fresh MLP under DDP on ``group`` (with the comm ``hook``, if any);
    returns the losses and parameters."""
    model = _mlp()
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group)
    if hook is not None:
        ddp.register_comm_hook(None, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(seed + hvd.rank())
    losses = []
    for _ in range(steps):
        x = torch.randn(8, 16, generator=g)
        y = torch.randint(0, 4, (8,), generator=g)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().clone() for p in model.parameters()]


def test_ddp_on_kolo_matches_ddp_on_gloo():
    gloo = dist.new_group(backend="gloo")
    kolo_losses, kolo_params = _train(None, 5, 7)
    gloo_losses, gloo_params = _train(gloo, 5, 7)
    assert kolo_losses == pytest.approx(gloo_losses, rel=1e-5, abs=1e-6)
    for a, b in zip(kolo_params, gloo_params):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)


def _fully_shard():
    # torch 1.13's torch.distributed.fsdp fails to import on Python 3.11: ask the version first.
    if tuple(int(v) for v in torch.__version__.split(".")[:2]) < (2, 6):
        return None
    from torch.distributed.fsdp import fully_shard
    return fully_shard


@pytest.mark.skipif(_fully_shard() is None,
                    reason="FSDP2 (torch.distributed.fsdp.fully_shard) needs torch >= 2.6; "
                           "this is torch %s" % torch.__version__)
def test_fsdp2_fully_shard_on_kolo_matches_gloo():
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    fully_shard = _fully_shard()

    def train(mesh):
        torch.manual_seed(0)
        layers = [torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
                  for _ in range(2)]
        model = torch.nn.Sequential(*layers, torch.nn.Linear(32, 8))
        for layer in layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        g = torch.Generator().manual_seed(hvd.rank())
        losses = []
        for _ in range(4):
            x = torch.randn(4, 6, 32, generator=g)
            y = torch.randint(0, 8, (4,), generator=g)
            loss = torch.nn.functional.cross_entropy(model(x).mean(1), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        full = [p.full_tensor().detach().clone() for p in model.parameters()]
        return losses, full

    gloo = dist.new_group(backend="gloo")
    kolo_losses, kolo_params = train(init_device_mesh("cpu", (hvd.size(),)))
    gloo_losses, gloo_params = train(DeviceMesh.from_group(gloo, "cpu"))
    assert kolo_losses == pytest.approx(gloo_losses, rel=1e-5, abs=1e-6)
    for a, b in zip(kolo_params, gloo_params):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("hook_name", ["allreduce_hook", "fp16_compress_hook",
                                       "bf16_compress_hook"])
def test_ddp_comm_hook_on_a_gloo_group_matches_plain_ddp(hook_name):
    # DDP runs on gloo; the hook sends its buckets through kolo instead. float32 all the way
    # must give DDP's own result; the compress hooks within their precision.
    from kolo.torch import ddp_comm_hook

    gloo = dist.new_group(backend="gloo")
    hooked, hooked_params = _train(gloo, 4, 11, getattr(ddp_comm_hook, hook_name))
    plain, plain_params = _train(gloo, 4, 11)
    tol = {"allreduce_hook": 1e-6, "fp16_compress_hook": 2e-3, "bf16_compress_hook": 2e-2}
    assert hooked == pytest.approx(plain, rel=tol[hook_name], abs=tol[hook_name])
    for a, b in zip(hooked_params, plain_params):
        assert torch.allclose(a, b, rtol=tol[hook_name], atol=tol[hook_name])
