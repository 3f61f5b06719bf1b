"""kolo.torch on CUDA tensors (issues 3 and 7): allreduce against the CPU reference, the
ordering with the framework's stream (kolo waits for the work queued on the tensor's current
stream before it reads), DistributedOptimizer on a model on the GPU, and a clear refusal from
the operations that have no device path yet. Skipped where torch sees no GPU (every test here
needs one); on a lent GPU this runs from scripts/gpu_check.sh's full build.
"""
import pytest
import torch

import kolo.torch as hvd

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


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


def test_other_operations_refuse_cuda_tensors():
    x = torch.ones(4, device=device())
    with pytest.raises(hvd.UnsupportedTensorError if hasattr(hvd, "UnsupportedTensorError")
                       else (TypeError, ValueError)):
        hvd.allgather(x, name="cuda_allgather")
