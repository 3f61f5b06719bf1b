"""kolo.torch on CUDA tensors: allreduce, allgather, alltoall and
reducescatter (and the grouped ones) against CPU references computed from every rank's known
input, with outputs on the input's device; the ordering with the framework's stream (kolo waits
for the work queued on the tensor's current stream before it reads), DistributedOptimizer on a
model on the GPU, and a clear refusal of reductions NCCL cannot do. Skipped where torch sees no
GPU (every test here needs one), and where ranks would share a GPU (NCCL needs one per rank);
on a lent GPU this runs at one rank from scripts/gpu_check.sh's full build.
"""
import pytest
import torch

import kolo.torch as hvd

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@pytest.fixture(autouse=True)
def gpu_per_rank():
    # Every rank of a node sees the same count, so every rank skips alike.
    if hvd.local_size() > torch.cuda.device_count():
        pytest.skip("%d ranks on this node, %d GPUs: NCCL needs a GPU per rank"
                    % (hvd.local_size(), torch.cuda.device_count()))


def device():
    return torch.device("cuda", hvd.local_rank() % torch.cuda.device_count())


def rank_tensor(rank, n=1000, dtype=torch.float32):
    return (torch.arange(n, dtype=torch.float64) % 17 + rank).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64, torch.int32])
@pytest.mark.parametrize("op", ["Sum", "Average"])
def test_allreduce_matches_the_cpu_reference(dtype, op):
    if op == "Average" and not dtype.is_floating_point:
        pytest.skip("integer Average on CUDA tensors is refused (use Sum)")
    n, me = hvd.size(), hvd.rank()
    x = rank_tensor(me, dtype=dtype).to(device())
    out = hvd.allreduce(x, op=getattr(hvd, op), name="cuda_%s_%s" % (dtype, op))
    want = sum(rank_tensor(r).double() for r in range(n))
    if op == "Average":
        want = want / n
    assert out.device == x.device
    tol = 1e-2 if dtype == torch.float16 else 1e-6
    assert torch.allclose(out.cpu().double(), want, rtol=tol, atol=tol)


def test_waits_for_the_current_stream():
    # The last write to x is still queued behind a large copy on the current stream when x is
    # submitted: kolo must reduce the written values (zeros), not the ones before.
    x = torch.ones(1 << 20, device=device())
    big_a = torch.empty(1 << 28, device=device())
    big_b = torch.empty_like(big_a)
    big_b.copy_(big_a)
    x.zero_()
    hvd.allreduce_(x, op=hvd.Sum, name="cuda_ordering")
    assert float(x.abs().max()) == 0.0


def test_distributed_optimizer_on_the_gpu_keeps_ranks_identical():
    torch.manual_seed(1234)
    model = torch.nn.Linear(8, 4).to(device())
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for step in range(3):
        opt.zero_grad()
        data = torch.randn(16, 8, device=device()) + hvd.rank()
        model(data).sum().backward()
        opt.step()
    flat = torch.cat([p.detach().cpu().flatten() for p in model.parameters()])
    gathered = hvd.allgather(flat.unsqueeze(0), name="cuda_params")
    assert torch.equal(gathered[0], gathered[-1])


def rows(rank, count, width=3, dtype=torch.float32):
    """Rank-unique rows: row i of rank r holds r * 1000 + i * width + column."""
    base = rank * 1000 + torch.arange(count * width, dtype=torch.float64).reshape(count, width)
    return base.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.int16,
                                   torch.uint8, torch.bool])
def test_allgather_of_unequal_rows_matches_the_cpu_reference(dtype):
    n, me = hvd.size(), hvd.rank()
    x = (rows(me, me + 1) % 200).to(dtype).to(device())
    out = hvd.allgather(x, name="cuda_gather_%s" % dtype)
    assert out.device == x.device and out.dtype == dtype
    want = torch.cat([(rows(r, r + 1) % 200).to(dtype) for r in range(n)])
    assert torch.equal(out.cpu(), want)


def test_grouped_allgather_of_cuda_tensors():
    n, me = hvd.size(), hvd.rank()
    xs = [rows(me, 2).to(device()), rows(me, me + 1, width=1, dtype=torch.int64).to(device())]
    outs = hvd.grouped_allgather(xs, name="cuda_grouped_gather")
    assert all(o.device == xs[0].device for o in outs)
    assert torch.equal(outs[0].cpu(), torch.cat([rows(r, 2) for r in range(n)]))
    assert torch.equal(outs[1].cpu(),
                       torch.cat([rows(r, r + 1, width=1, dtype=torch.int64) for r in range(n)]))


def test_alltoall_with_splits_matches_the_cpu_reference():
    n, me = hvd.size(), hvd.rank()
    # rank r sends q + r + 1 rows to rank q
    def splits_of(r):
        return [q + r + 1 for q in range(n)]
    x = rows(me, sum(splits_of(me))).to(device())
    out, received = hvd.alltoall(x, splits=splits_of(me), name="cuda_alltoall")
    assert out.device == x.device
    want = []
    for q in range(n):
        start = sum(splits_of(q)[:me])
        want.append(rows(q, sum(splits_of(q)))[start:start + splits_of(q)[me]])
    assert torch.equal(out.cpu(), torch.cat(want))
    assert received.tolist() == [me + q + 1 for q in range(n)]


@pytest.mark.parametrize("op", ["Sum", "Average"])
def test_reducescatter_of_unequal_shares_matches_the_cpu_reference(op):
    n, me = hvd.size(), hvd.rank()
    total = 2 * n + 1  # shares differ by a row when n > 1
    x = rows(me, total).to(device())
    out = hvd.reducescatter(x, op=getattr(hvd, op), name="cuda_rs_%s" % op)
    assert out.device == x.device
    full = sum(rows(r, total).double() for r in range(n))
    if op == "Average":
        full = full / n
    share = [total // n + (1 if r < total % n else 0) for r in range(n)]
    start = sum(share[:me])
    assert out.shape == (share[me], 3)
    assert torch.allclose(out.cpu().double(), full[start:start + share[me]], rtol=1e-6)


def test_grouped_reducescatter_and_allreduce_of_cuda_tensors():
    n, me = hvd.size(), hvd.rank()
    xs = [rows(me, 2 * n).to(device()), rows(me, n, width=5).to(device())]
    outs = hvd.synchronize(hvd.grouped_reducescatter_async(xs, op=hvd.Sum,
                                                           name="cuda_grouped_rs"))
    for x, o in zip(xs, outs):
        assert o.device == x.device
        want = sum(rows(r, x.shape[0], width=x.shape[1]).double() for r in range(n))
        per = x.shape[0] // n
        assert torch.allclose(o.cpu().double(), want[me * per:(me + 1) * per])
    reduced = hvd.grouped_allreduce(xs, op=hvd.Sum, name="cuda_grouped_ar")
    for x, o in zip(xs, reduced):
        assert o.device == x.device
        want = sum(rows(r, x.shape[0], width=x.shape[1]).double() for r in range(n))
        assert torch.allclose(o.cpu().double(), want)


def test_reducescatter_waits_for_the_current_stream():
    x = torch.ones(4 * hvd.size(), 1 << 16, device=device())
    big_a = torch.empty(1 << 28, device=device())
    big_b = torch.empty_like(big_a)
    big_b.copy_(big_a)
    x.zero_()
    out = hvd.reducescatter(x, op=hvd.Sum, name="cuda_rs_ordering")
    assert float(out.abs().max()) == 0.0


def test_reductions_nccl_cannot_do_are_refused_naming_the_tensor():
    x = torch.ones(2 * hvd.size(), dtype=torch.int16, device=device())
    with pytest.raises(hvd.HorovodInternalError, match="int16"):
        hvd.reducescatter(x, op=hvd.Sum, name="cuda_rs_int16")
    y = torch.ones(4, dtype=torch.int32, device=device())
    with pytest.raises(hvd.HorovodInternalError, match="Average of integer"):
        hvd.allreduce(y, op=hvd.Average, name="cuda_ar_int_avg")
