"""hvd.DistributedOptimizer(op=Adasum), Horovod's Adasum optimizer: each rank's wrapped optimizer
steps on its own gradients and step() sets every parameter to its start plus the Adasum of the
ranks' deltas.

Every rank rebuilds every rank's replica of the model in float64 (same start, that rank's
batches, its own optimizer and optimizer state), takes each replica's delta and combines the
deltas with the float64 Adasum tree of kolo_reference, so the expected parameters come from
torch alone, never from kolo. At a rank count that is not a power of two only the refusal is
tested."""
import pytest
import torch
import torch.nn.functional as F

import kolo.torch as hvd
from kolo_reference import adasum_reference, generator

PARAM_TOL = dict(rtol=1e-5, atol=1e-6)


def power_of_two(n):
    return n & (n - 1) == 0


def _skip_unless_pof2():
    if not power_of_two(hvd.size()):
        pytest.skip("Adasum runs on a power-of-two number of ranks (the refusal is tested below)")


class Net(torch.nn.Module):
    """Two layers, and a head only rank 0 uses: on the other ranks backward never reaches it."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(4321)
        self.fc1 = torch.nn.Linear(5, 4)
        self.fc2 = torch.nn.Linear(4, 3)
        self.rank0_head = torch.nn.Linear(4, 3)

    def forward(self, x, rank):
        h = torch.tanh(self.fc1(x))
        out = self.fc2(h)
        if rank == 0:
            out = out + self.rank0_head(h)
        return out


def loss_of(model, rank, batch_id):
    g = generator("adasum-optimizer-batch", rank, batch_id)
    x, y = torch.randn(6, 5, generator=g), torch.randn(6, 3, generator=g)
    dtype = next(model.parameters()).dtype
    return F.mse_loss(model(x.to(dtype), rank), y.to(dtype))


OPTIMIZERS = {
    "sgd": lambda params: torch.optim.SGD(params, lr=0.1),
    "momentum": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True),
    # eps near the gradients' size: with a tiny eps Adam's first update is lr * sign(g), and
    # the sign vectors of a small tensor cancel exactly between two ranks often enough, where
    # Adasum is not continuous (the rounding noise left of a zero sum sets the next level's
    # coefficient), so float32 and a float64 reference could rightly differ.
    "adam": lambda params: torch.optim.Adam(params, lr=0.01, eps=0.05),
    # Two groups with their own learning rates (the step on one parameter empties the other).
    "two-groups": lambda params: torch.optim.SGD(
        [{"params": params[:2]}, {"params": params[2:], "lr": 0.05}], lr=0.2),
}


def make(kind, named=True, **kw):
    _skip_unless_pof2()  # every test that trains starts here
    model = Net()
    opt = hvd.DistributedOptimizer(
        OPTIMIZERS[kind](list(model.parameters())), op=hvd.Adasum,
        named_parameters=model.named_parameters() if named else None, **kw)
    return model, opt


def mean(deltas):
    return sum(d.double() for d in deltas) / len(deltas)


def expected_parameters(kind, passes, zero_grad_step=False, compress=None,
                        combine=adasum_reference):
    """The parameters after each step as float64 tensors, for steps that run backward on the
    batches `passes[s]`. Each rank's replica starts from the combined parameters of the step
    before and keeps its own optimizer state; like the distributed optimizer's parameters,
    its start with zero gradients (`zero_grad_step`: and a step on them first, as
    broadcast_optimizer_state makes). `compress` rounds the deltas and their combination as the
    wire carries them."""
    current = [p.detach().double() for p in Net().parameters()]
    replicas = []
    for r in range(hvd.size()):
        m = Net().double()
        opt = OPTIMIZERS[kind](list(m.parameters()))
        for p in m.parameters():
            p.grad = torch.zeros_like(p)
        if zero_grad_step:
            opt.step()
        replicas.append((m, opt))
    after = []
    for batches in passes:
        deltas = []
        for r, (m, opt) in enumerate(replicas):
            with torch.no_grad():
                for p, c in zip(m.parameters(), current):
                    p.copy_(c)
            for b in batches:
                loss_of(m, r, b).backward()
            opt.step()
            opt.zero_grad()
            delta = [p.detach() - c for p, c in zip(m.parameters(), current)]
            deltas.append([compress(d) for d in delta] if compress else delta)
        combined = [combine(list(ds)) for ds in zip(*deltas)]
        if compress:
            combined = [compress(d) for d in combined]
        current = [c + d for c, d in zip(current, combined)]
        after.append(current)
    return after


def assert_parameters(model, expected, what, **tol):
    for (name, p), exp in zip(model.named_parameters(), expected):
        assert p.dtype == torch.float32, "%s: %s is %s" % (what, name, p.dtype)
        torch.testing.assert_close(p.detach().double(), exp, msg=lambda m: "%s, %s: %s" % (
            what, name, m), **(tol or PARAM_TOL))


@pytest.mark.parametrize("kind", list(OPTIMIZERS))
def test_step_adds_the_adasum_of_every_ranks_own_update(kind):
    # "two-groups" goes without named_parameters: Horovod's default names, numbered across the
    # groups.
    model, opt = make(kind, named=kind != "two-groups")
    if kind == "two-groups":
        assert sorted(opt._parameter_names.values()) == sorted(
            "allreduce.noname.%d" % i for i in range(6))
    expected = expected_parameters(kind, [[0], [1]])
    # The reference tells Adasum from an average of the updates: the head only rank 0 trains
    # keeps rank 0's whole update, and the shared layers' updates are not parallel (those of
    # a small bias can be: Adam's first update is the learning rate times the gradient's sign).
    averaged = expected_parameters(kind, [[0]], combine=mean)[0]
    differing = {name for (name, _), e, a in zip(model.named_parameters(), expected[0], averaged)
                 if float((e - a).abs().max()) > 100 * PARAM_TOL["atol"]}
    assert {"rank0_head.weight", "fc1.weight"} <= differing, differing
    for step, batch_id in enumerate((0, 1)):
        loss_of(model, hvd.rank(), batch_id).backward()
        opt.step()
        assert_parameters(model, expected[step], "%s, step %d" % (kind, step + 1))
        opt.zero_grad()


def test_parameters_start_with_zero_gradients():
    # As in Horovod: a parameter backward never reaches is still stepped (with a zero gradient)
    # and its zero delta all-reduced, so the other ranks' updates of it go through.
    model, opt = make("adam")
    for name, p in model.named_parameters():
        assert p.grad is not None and not p.grad.any(), name
    loss_of(model, hvd.rank(), 2).backward()
    opt.step()
    assert_parameters(model, expected_parameters("adam", [[2]])[0], "after one step")
    assert all(len(opt.state[p]) > 0 for p in model.parameters()), "a parameter was not stepped"


def test_backward_passes_per_step_2():
    model, opt = make("momentum", backward_passes_per_step=2)
    start = [p.detach().clone() for p in model.parameters()]
    expected = expected_parameters("momentum", [[3, 4], [5, 6]])
    loss_of(model, hvd.rank(), 3).backward()
    # One pass of two: nothing stepped yet.
    for (name, p), s in zip(model.named_parameters(), start):
        assert torch.equal(p.detach(), s), name
    loss_of(model, hvd.rank(), 4).backward()
    opt.step()
    assert_parameters(model, expected[0], "gradients of 2 passes")
    opt.zero_grad()
    loss_of(model, hvd.rank(), 5).backward()
    loss_of(model, hvd.rank(), 6).backward()
    opt.step()
    assert_parameters(model, expected[1], "second step of 2 passes")


def test_step_before_the_last_backward_pass_uses_the_passes_so_far():
    model, opt = make("sgd", backward_passes_per_step=2)
    loss_of(model, hvd.rank(), 7).backward()
    opt.step()
    assert_parameters(model, expected_parameters("sgd", [[7]])[0], "step after 1 pass of 2")


def test_step_with_a_closure():
    model, opt = make("adam")

    def closure():
        opt.zero_grad()
        loss = loss_of(model, hvd.rank(), 8)
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert isinstance(loss, torch.Tensor) and loss.dim() == 0
    assert_parameters(model, expected_parameters("adam", [[8]])[0], "step(closure)")


def test_compression_fp16():
    model, opt = make("sgd", compression=hvd.Compression.fp16)
    loss_of(model, hvd.rank(), 9).backward()
    opt.step()
    # Each delta crosses the wire as float16 and the Adasum comes back as float16: half a
    # float16 ulp of the deltas (at most ~0.1 here) on top of the float32 parameters.
    expected = expected_parameters("sgd", [[9]], compress=lambda d: d.half().double())[0]
    assert_parameters(model, expected, "Compression.fp16", rtol=1e-5, atol=1e-4)


def test_synchronize_skip_synchronize_and_zero_grad_as_horovod():
    model, opt = make("sgd")
    loss_of(model, hvd.rank(), 10).backward()
    opt.synchronize()  # does nothing: step() combines the updates
    with pytest.raises(AssertionError, match="Skipping synchronization is not supported"):
        with opt.skip_synchronize():
            pass
    with pytest.raises(AssertionError, match="zero_grad"):
        opt.zero_grad()
    opt.step()
    assert_parameters(model, expected_parameters("sgd", [[10]])[0], "after the refusals")


def test_more_backward_passes_than_declared_is_refused():
    model, opt = make("sgd")
    loss_of(model, hvd.rank(), 11).backward()
    with pytest.raises(AssertionError, match="more than backward_passes_per_step"):
        loss_of(model, hvd.rank(), 12).backward()
    # The first pass's updates are still combined.
    opt.step()
    assert_parameters(model, expected_parameters("sgd", [[11]])[0], "after the refusal")


def test_broadcast_optimizer_state_steps_the_wrapped_optimizer():
    model, opt = make("adam")
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert all(int(opt.state[p]["step"]) == 1 for p in model.parameters())
    loss_of(model, hvd.rank(), 13).backward()
    opt.step()
    expected = expected_parameters("adam", [[13]], zero_grad_step=True)[0]
    assert_parameters(model, expected, "after broadcast_optimizer_state")


def test_arguments_horovod_refuses():
    model = Net()
    with pytest.raises(ValueError, match="gradient_predivide_factor not supported"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), op=hvd.Adasum,
                                 gradient_predivide_factor=2.0)
    with pytest.raises(ValueError, match="backward_passes_per_step must be > 0"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), op=hvd.Adasum,
                                 backward_passes_per_step=0)
    ps = hvd.add_process_set([0])
    try:
        with pytest.raises(NotImplementedError, match="non-global process sets"):
            hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                     op=hvd.Adasum, process_set=ps)
    finally:
        hvd.remove_process_set(ps)


def test_other_rank_counts_are_refused_naming_the_count():
    n = hvd.size()
    if power_of_two(n):
        pytest.skip("this rank count is a power of two")
    model = Net()
    with pytest.raises(NotImplementedError) as info:
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), op=hvd.Adasum)
    assert "power-of-two" in str(info.value) and "has %d" % n in str(info.value), str(info.value)
    for p in model.parameters():
        assert p.grad is None, "the refused optimizer touched the parameters"


def test_parameters_off_the_cpu_are_refused_naming_one():
    _skip_unless_pof2()
    model = torch.nn.Linear(3, 2, device="meta")
    with pytest.raises(NotImplementedError, match="CPU tensors only.*'bias' is on meta"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), op=hvd.Adasum,
                                 named_parameters=model.named_parameters())
