"""hvd.DistributedOptimizer, broadcast_parameters and broadcast_optimizer_state.

Every rank rebuilds the model each rank starts from and each rank's data, so the expected
gradients (the average over ranks of each rank's local gradient) and the root's parameters and
optimizer state are computed locally, without kolo."""
import os
import warnings

import pytest
import torch
import torch.nn.functional as F

import kolo.torch as hvd
from kolo_reference import generator

GRAD_TOL = dict(rtol=1e-5, atol=1e-6)


def make_model(seed=1234):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3))


def batch(rank, step):
    g = generator("batch", rank, step)
    return torch.randn(6, 5, generator=g), torch.randn(6, 3, generator=g)


def loss_of(model, rank, step):
    x, y = batch(rank, step)
    return F.mse_loss(model(x), y)


def local_grads(rank, steps, seed=1234):
    """The gradients rank `rank` accumulates locally over batches `steps` (no kolo)."""
    model = make_model(seed)
    for step in steps:
        loss_of(model, rank, step).backward()
    return [p.grad.detach().double().clone() for p in model.parameters()]


def averaged_grads(steps, compress=None):
    per_rank = [local_grads(r, steps) for r in range(hvd.size())]
    if compress is not None:
        per_rank = [[compress(g) for g in grads] for grads in per_rank]
    return [torch.stack(gs).mean(0) for gs in zip(*per_rank)]


def assert_grads(model, expected, what, **tol):
    tol = tol or GRAD_TOL
    for (name, p), exp in zip(model.named_parameters(), expected):
        assert p.grad is not None, "%s: %s has no gradient" % (what, name)
        assert p.grad.dtype == torch.float32, "%s: %s gradient is %s" % (what, name, p.grad.dtype)
        torch.testing.assert_close(p.grad.double(), exp, msg=lambda m: "%s, %s: %s" % (
            what, name, m), **tol)


def sgd(model, lr=0.1, **kw):
    return torch.optim.SGD(model.parameters(), lr=lr, **kw)


def test_gradients_are_the_average_over_ranks():
    model = make_model()
    opt = hvd.DistributedOptimizer(sgd(model), named_parameters=model.named_parameters())
    before = [p.detach().clone() for p in model.parameters()]
    loss_of(model, hvd.rank(), 0).backward()
    opt.step()
    expected = averaged_grads([0])
    assert_grads(model, expected, "after step()")
    for p, b, g in zip(model.parameters(), before, expected):
        torch.testing.assert_close(p.detach().double(), b.double() - 0.1 * g, **GRAD_TOL)
    # A second iteration (names reused, zero_grad after step is allowed).
    opt.zero_grad()
    loss_of(model, hvd.rank(), 1).backward()
    opt.synchronize()
    # Expected: every rank's gradient at the current (stepped) parameters, averaged.
    current = [p.detach().clone() for p in model.parameters()]
    per_rank = []
    for r in range(hvd.size()):
        m = make_model()
        with torch.no_grad():
            for p, c in zip(m.parameters(), current):
                p.copy_(c)
        loss_of(m, r, 1).backward()
        per_rank.append([p.grad.double() for p in m.parameters()])
    expected2 = [torch.stack(gs).mean(0) for gs in zip(*per_rank)]
    assert_grads(model, expected2, "second iteration")
    with opt.skip_synchronize():
        opt.step()


def _compiled_autograd():
    """torch._dynamo's compiled autograd context (its name changed across torch 2.x), or None
    where torch has no torch.compiler (torch 1.x)."""
    if getattr(getattr(torch, "compiler", None), "disable", None) is None:
        return None
    try:
        import torch._dynamo.compiled_autograd as ca
        from torch._dynamo.convert_frame import input_codes
    except ImportError:
        return None
    enable = getattr(ca, "_enable", None) or getattr(ca, "enable", None)
    if enable is None or not hasattr(input_codes, "seen"):
        return None
    return enable, input_codes


@pytest.mark.skipif(_compiled_autograd() is None, reason="torch without compiled autograd")
def test_gradient_hooks_are_kept_out_of_compiled_autograd():
    # Under compiled autograd the backward graph is traced by torch.compile; kolo's hooks (which
    # submit the all-reduces) must run as they are, not be traced: no frame of kolo.torch is
    # compiled, and the gradients are still every rank's average.
    import torch._dynamo
    enable, input_codes = _compiled_autograd()
    model = make_model()
    opt = hvd.DistributedOptimizer(sgd(model), named_parameters=model.named_parameters())
    torch._dynamo.reset()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # dynamo's notes on the model's own graph breaks
            with enable(torch.compile(backend="eager")):
                loss_of(model, hvd.rank(), 0).backward()
        compiled = [ref() for ref in input_codes.seen]
    finally:
        torch._dynamo.reset()
    opt.synchronize()
    kolo_dir = os.path.dirname(hvd.__file__)
    traced = sorted({"%s (%s)" % (c.co_name, os.path.basename(c.co_filename))
                     for c in compiled if c is not None and c.co_filename.startswith(kolo_dir)})
    assert not traced, "compiled autograd traced kolo.torch's code: %s" % ", ".join(traced)
    assert_grads(model, averaged_grads([0]), "compiled autograd")


def test_without_named_parameters():
    model = make_model()
    opt = hvd.DistributedOptimizer(sgd(model))
    loss_of(model, hvd.rank(), 2).backward()
    opt.synchronize()
    assert_grads(model, averaged_grads([2]), "unnamed parameters")
    with opt.skip_synchronize():
        opt.step()


def test_backward_passes_per_step_2():
    model = make_model()
    opt = hvd.DistributedOptimizer(sgd(model), named_parameters=model.named_parameters(),
                                   backward_passes_per_step=2)
    loss_of(model, hvd.rank(), 0).backward()
    loss_of(model, hvd.rank(), 1).backward()  # the all-reduce starts here, after 2 passes
    opt.step()
    # Local accumulation of both passes, then the average over ranks (no division by 2).
    assert_grads(model, averaged_grads([0, 1]), "accumulated over 2 backward passes")
    # Next step accumulates afresh.
    opt.zero_grad()
    loss_of(model, hvd.rank(), 3).backward()
    loss_of(model, hvd.rank(), 4).backward()
    opt.synchronize()
    grads = [p.grad.detach().clone() for p in model.parameters()]
    with opt.skip_synchronize():
        opt.step()
    assert all(torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("groups", ["int", "lists"])
def test_groups(groups):
    model = make_model()
    params = list(model.parameters())
    if groups == "int":
        arg = 2
    else:
        arg = [[params[0], params[1]], [params[2]]]  # params[3] is reduced on its own
    opt = hvd.DistributedOptimizer(sgd(model), named_parameters=model.named_parameters(),
                                   groups=arg)
    loss_of(model, hvd.rank(), 5).backward()
    opt.step()
    assert_grads(model, averaged_grads([5]), "groups=%s" % groups)


def test_compression_fp16():
    model = make_model()
    opt = hvd.DistributedOptimizer(sgd(model), named_parameters=model.named_parameters(),
                                   compression=hvd.Compression.fp16)
    loss_of(model, hvd.rank(), 6).backward()
    opt.synchronize()
    # Each rank's gradient is rounded to float16, averaged (kolo reduces float16 in float32 and
    # rounds once), and brought back to float32.
    expected = [g.half().double()
                for g in averaged_grads([6], compress=lambda g: g.half().double())]
    assert_grads(model, expected, "Compression.fp16", rtol=2e-3, atol=2e-4)
    with opt.skip_synchronize():
        opt.step()


def test_op_sum():
    model = make_model()
    opt = hvd.DistributedOptimizer(sgd(model), named_parameters=model.named_parameters(),
                                   op=hvd.Sum)
    loss_of(model, hvd.rank(), 7).backward()
    opt.synchronize()
    expected = [g * hvd.size() for g in averaged_grads([7])]
    assert_grads(model, expected, "op=Sum")
    with opt.skip_synchronize():
        opt.step()


def test_skip_synchronize():
    model = make_model()
    opt = hvd.DistributedOptimizer(sgd(model), named_parameters=model.named_parameters())
    before = [p.detach().clone() for p in model.parameters()]
    loss_of(model, hvd.rank(), 8).backward()
    opt.synchronize()
    expected = averaged_grads([8])
    assert_grads(model, expected, "after synchronize()")
    # Gradients can be inspected or clipped between synchronize() and step().
    for p in model.parameters():
        p.grad.mul_(0.5)
    with warnings.catch_warnings():
        # No "step() called without skip_synchronize() after synchronize()" warning here.
        warnings.filterwarnings("error", message=".*synchroniz.*")
        with opt.skip_synchronize():
            opt.step()
    for p, b, g in zip(model.parameters(), before, expected):
        torch.testing.assert_close(p.detach().double(), b.double() - 0.1 * 0.5 * g, **GRAD_TOL)
    # Horovod warns when step() synchronizes again after an explicit synchronize().
    opt.zero_grad()
    loss_of(model, hvd.rank(), 9).backward()
    opt.synchronize()
    with pytest.warns(UserWarning, match="skip_synchronize"):
        opt.step()


def test_zero_grad_before_step_is_refused():
    model = make_model()
    opt = hvd.DistributedOptimizer(sgd(model), named_parameters=model.named_parameters())
    loss_of(model, hvd.rank(), 10).backward()
    with pytest.raises(AssertionError):
        opt.zero_grad()
    opt.synchronize()
    assert_grads(model, averaged_grads([10]), "after the refused zero_grad")
    with opt.skip_synchronize():
        opt.step()


@pytest.mark.parametrize("form", ["state_dict", "named_parameters"])
def test_broadcast_parameters(form):
    n = hvd.size()
    for root in sorted({0, n - 1}):
        model = make_model(seed=100 + hvd.rank())
        expected = make_model(seed=100 + root).state_dict()
        if form == "state_dict":
            hvd.broadcast_parameters(model.state_dict(), root_rank=root)
        else:
            hvd.broadcast_parameters(model.named_parameters(), root_rank=root)
        for name, value in model.state_dict().items():
            assert torch.equal(value, expected[name]), "%s differs from root %d's" % (name, root)


def _train(model, opt, rank, steps):
    for step in range(steps):
        opt.zero_grad()
        loss_of(model, rank, 20 + step).backward()
        opt.step()


def _make_optimizer(kind, model, rank):
    if kind == "sgd-momentum":
        return torch.optim.SGD(model.parameters(), lr=0.01 * (rank + 1), momentum=0.5 + 0.1 * rank)
    return torch.optim.Adam(model.parameters(), lr=0.001 * (rank + 1), betas=(0.9, 0.99))


def _as_float(v):
    return float(v.item()) if isinstance(v, torch.Tensor) else float(v)


def _same_option(got, want):
    """Hyper-parameters equal to the root's. Horovod sends them as float32 tensors, so a float
    may come back rounded to float32; anything else must be equal."""
    if isinstance(want, bool) or want is None or isinstance(want, str):
        return got == want
    if isinstance(want, (tuple, list)):
        return (isinstance(got, (tuple, list)) and len(got) == len(want)
                and all(_same_option(g, w) for g, w in zip(got, want)))
    if isinstance(want, (int, float)):
        return isinstance(got, (int, float)) and got == pytest.approx(want, rel=1e-6, abs=0)
    return got == want


@pytest.mark.parametrize("with_model", [False, True], ids=["no-model", "model"])
@pytest.mark.parametrize("kind", ["sgd-momentum", "adam"])
def test_broadcast_optimizer_state(kind, with_model):
    n = hvd.size()
    root = n - 1
    r = hvd.rank()
    # Every rank trains a different number of steps with its own data and hyper-parameters.
    model = make_model()
    opt = _make_optimizer(kind, model, r)
    _train(model, opt, r, steps=r + 1)
    ref_model = make_model()
    ref_opt = _make_optimizer(kind, ref_model, root)
    _train(ref_model, ref_opt, root, steps=root + 1)

    hvd.broadcast_parameters(model.state_dict(), root_rank=root)
    if with_model:
        hvd.broadcast_optimizer_state(opt, root, model)  # Horovod's positional model
    else:
        hvd.broadcast_optimizer_state(opt, root_rank=root)

    got, want = opt.state_dict(), ref_opt.state_dict()
    assert len(got["param_groups"]) == len(want["param_groups"])
    for g, w in zip(got["param_groups"], want["param_groups"]):
        for key, value in w.items():
            if key == "params":
                continue
            assert _same_option(g[key], value), "param_groups[%r] = %r, root has %r" % (
                key, g[key], value)
    assert sorted(got["state"]) == sorted(want["state"])
    for pid, w_state in want["state"].items():
        g_state = got["state"][pid]
        assert sorted(g_state) == sorted(w_state), (pid, sorted(g_state), sorted(w_state))
        for key, w_value in w_state.items():
            g_value = g_state[key]
            if key == "step":
                assert _as_float(g_value) == _as_float(w_value), \
                    "state[%d]['step'] = %r, root has %r" % (pid, g_value, w_value)
                assert type(g_value) is type(w_value), (type(g_value), type(w_value))
            else:
                assert torch.equal(g_value, w_value), "state[%d][%r] differs from the root's" % (
                    pid, key)
    # The broadcast state is usable: one more identical step keeps every rank equal to root.
    _train(model, opt, root, steps=1)
    _train(ref_model, ref_opt, root, steps=1)
    for (name, p), q in zip(model.named_parameters(), ref_model.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-6, atol=1e-7, msg=lambda m: (
            "%s after one more step differs from the root's: %s" % (name, m)))


@pytest.mark.parametrize("kind", ["sgd-momentum", "adam"])
def test_broadcast_optimizer_state_fresh(kind):
    # The usual call right after construction, before any step.
    root = 0
    model = make_model()
    opt = _make_optimizer(kind, model, hvd.rank())
    before = [p.detach().clone() for p in model.parameters()]
    hvd.broadcast_optimizer_state(opt, root_rank=root)
    want = _make_optimizer(kind, make_model(), root).state_dict()["param_groups"]
    for g, w in zip(opt.state_dict()["param_groups"], want):
        assert _same_option(g["lr"], w["lr"]), (g["lr"], w["lr"])
    for p, b in zip(model.parameters(), before):
        assert torch.equal(p, b), "broadcast_optimizer_state changed a parameter"


class _SparseEmbeddingNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(77)
        self.embedding = torch.nn.Embedding(10, 3, sparse=True)
        self.linear = torch.nn.Linear(3, 2)

    def forward(self, idx):
        return self.linear(self.embedding(idx))


@pytest.mark.parametrize("distributed", [False, True], ids=["sgd", "distributed-sgd"])
def test_broadcast_optimizer_state_model_marks_sparse_parameters(distributed):
    # Horovod's model argument: a fresh SGD's zero gradients are sparse for the parameters of
    # the model's sparse embeddings (as their real gradients will be), dense elsewhere; without
    # the model every zero gradient is dense.
    for with_model in (True, False):
        model = _SparseEmbeddingNet()
        before = [p.detach().clone() for p in model.parameters()]
        opt = torch.optim.SGD(model.parameters(), lr=0.01 * (hvd.rank() + 1))
        if distributed:
            opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
        if with_model:
            hvd.broadcast_optimizer_state(opt, 0, model)
        else:
            hvd.broadcast_optimizer_state(opt, 0)
        emb, lin = model.embedding.weight.grad, model.linear.weight.grad
        assert emb.is_sparse == with_model, (with_model, emb.layout)
        assert not lin.is_sparse
        assert torch.equal(emb.to_dense(), torch.zeros(10, 3))
        assert torch.equal(lin, torch.zeros(2, 3))
        for p, b in zip(model.parameters(), before):
            assert torch.equal(p.detach(), b), "broadcast_optimizer_state changed a parameter"
        if distributed:  # the zero gradients were never all-reduced: training goes on
            opt.zero_grad()
            model(torch.tensor([1, 2, hvd.rank()])).sum().backward()
            opt.step()


def test_broadcast_optimizer_state_third_argument_is_the_model():
    model = make_model()
    opt = _make_optimizer("adam", model, hvd.rank())
    with pytest.raises(TypeError, match="process_set="):
        hvd.broadcast_optimizer_state(opt, 0, hvd.global_process_set)


def test_distributed_optimizer_after_broadcast_keeps_ranks_in_step():
    # The canonical Horovod loop: broadcast, then train; parameters stay identical everywhere.
    model = make_model(seed=300 + hvd.rank())
    opt = hvd.DistributedOptimizer(sgd(model, momentum=0.9),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    for step in range(3):
        opt.zero_grad()
        loss_of(model, hvd.rank(), 40 + step).backward()
        opt.step()
    # Reproduce locally: start from root 0's model, average every rank's gradient each step.
    ref = make_model(seed=300)
    ref_opt = sgd(ref, momentum=0.9)
    for step in range(3):
        grads = []
        for r in range(hvd.size()):
            ref.zero_grad()
            loss_of(ref, r, 40 + step).backward()
            grads.append([p.grad.detach().double().clone() for p in ref.parameters()])
        for p, gs in zip(ref.parameters(), zip(*grads)):
            p.grad = torch.stack(gs).mean(0).float()
        ref_opt.step()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-6,
                                   msg=lambda m: "%s: %s" % (name, m))
