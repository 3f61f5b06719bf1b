"""Process sets in kolo.torch (Horovod 0.28's hvd.ProcessSet, add_process_set,
remove_process_set, process_set= of every operation), against references computed from every
member's known inputs. Inside a set, rank r is the r-th of its ascending ranks: allgather
concatenates in that order, reducescatter gives rank r the r-th share, alltoall's splits have one
entry per member, Average divides by the set's size; broadcast's root_rank stays a global rank
(Horovod's rule).

The sets used (n = hvd.size(), 2 or 3 here):
  "without_last": ranks 0..n-2 (the last rank is not a member: a non-member exists at every n);
  "evens" / "odds": a partition of the ranks, each rank working in its own set concurrently.
Every collective of a test runs before its assertions where that is possible, so a wrong value
on one rank does not leave the others waiting in the next collective.
"""
import pytest
import torch

import kolo.torch as hvd
from kolo import _kolo
from kolo_reference import assert_matches, reference_allreduce
from process_set_util import added, my_partition, partition, set_ranks, values


# ---- the ProcessSet object, add, remove -------------------------------------------------------


def test_process_set_object():
    ps = hvd.ProcessSet([2, 0, 1])
    assert ps.ranks == [0, 1, 2]
    assert ps.process_set_id is None and ps.size() is None and ps.rank() is None
    assert ps.included() == (hvd.rank() in (0, 1, 2))
    assert repr(ps) == "ProcessSet(process_set_id=None, ranks=[0, 1, 2], mpi_comm=None)"
    assert ps == hvd.ProcessSet((0, 1, 2)) and ps != hvd.ProcessSet([0, 1])
    assert hash(ps) == hash(hvd.ProcessSet([1, 2, 0]))
    with pytest.raises(ValueError):
        hvd.ProcessSet([0, "1"])
    with pytest.raises(ValueError):
        hvd.ProcessSet(3)

    g = hvd.global_process_set
    assert isinstance(g, hvd.ProcessSet)
    assert g.process_set_id == 0
    assert g.ranks == list(range(hvd.size()))
    assert g.size() == hvd.size() and g.rank() == hvd.rank() and g.included()
    assert g != ps
    assert "process_set_id=0" in repr(g)


@pytest.mark.parametrize("kind", ["without_last", "evens", "odds"])
def test_add_and_remove(kind):
    ranks = set_ranks(kind)
    member = hvd.rank() in ranks
    ps = hvd.add_process_set(list(reversed(ranks)))  # any order; kept ascending
    try:
        assert isinstance(ps, hvd.ProcessSet)
        assert ps.process_set_id > 0 and ps.ranks == ranks
        assert ps.size() == len(ranks)
        assert ps.included() == member
        if member:
            assert ps.rank() == ranks.index(hvd.rank())
        else:
            with pytest.raises(ValueError, match="not part of this process set"):
                ps.rank()
        assert _kolo.process_set_ranks(ps.process_set_id) == ranks
    finally:
        removed = hvd.remove_process_set(ps)
    assert removed is True
    assert ps.process_set_id is None and ps.size() is None
    # Horovod's answers for what cannot be removed
    assert hvd.remove_process_set(ps) is False
    assert hvd.remove_process_set(hvd.global_process_set) is False
    assert hvd.global_process_set.process_set_id == 0


def test_add_takes_a_process_set_object_and_returns_it():
    ps = hvd.ProcessSet(set_ranks("without_last"))
    with added(ps) as same:
        assert same is ps and ps.process_set_id is not None


def test_ids_are_fresh_and_the_same_on_every_rank():
    with added(set_ranks("evens")) as evens:
        with added(set_ranks("odds")) as odds:
            ids = [evens.process_set_id, odds.process_set_id]
            everyone = hvd.allgather_object(ids)
    assert len(set(ids)) == 2 and 0 not in ids
    assert everyone == [ids] * hvd.size()


# ---- operations on a set, against references ------------------------------------------------


@pytest.mark.parametrize("kind", ["without_last", "partition"])
@pytest.mark.parametrize("op", ["Sum", "Average", "Max"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.float64],
                         ids=["float32", "int32", "float64"])
def test_allreduce(kind, op, dtype):
    ranks = set_ranks("without_last") if kind == "without_last" else my_partition()
    key = ("ps-ar", kind, op)
    inputs = {r: values(key, r, dtype, (4, 3), op) for r in ranks}
    ctx = added(ranks) if kind == "without_last" else partition()
    with ctx as ps:
        if hvd.rank() not in ranks:
            return
        mine = inputs[hvd.rank()].clone()
        out = hvd.allreduce(mine, op=getattr(hvd, op), name="ps.ar", process_set=ps)
        buf = inputs[hvd.rank()].clone()
        hvd.allreduce_(buf, op=getattr(hvd, op), name="ps.ar_", process_set=ps)
    expected = reference_allreduce([inputs[r] for r in ranks], op)
    assert_matches(out, expected, "allreduce on %s" % ranks)
    assert_matches(buf, expected, "allreduce_ on %s" % ranks)
    assert torch.equal(mine, inputs[hvd.rank()]), "the input must not be modified"


def test_allreduce_scale_factors_grouped_and_async():
    with partition() as ps:
        ranks = ps.ranks
        k = len(ranks)
        a = {r: values("ps-scale-a", r, torch.float64, (5,)) for r in ranks}
        b = {r: values("ps-scale-b", r, torch.float32, (2, 2)) for r in ranks}
        h = hvd.allreduce_async(a[hvd.rank()], op=hvd.Average, prescale_factor=0.5,
                                postscale_factor=3.0, process_set=ps)
        scaled = hvd.synchronize(h)
        grouped = hvd.grouped_allreduce([a[hvd.rank()], b[hvd.rank()]], op=hvd.Sum,
                                        process_set=ps)
        in_place = [a[hvd.rank()].clone(), b[hvd.rank()].clone()]
        hvd.grouped_allreduce_(in_place, op=hvd.Average, process_set=ps)
    la, lb = [a[r] for r in ranks], [b[r] for r in ranks]
    assert_matches(scaled, torch.stack(la).sum(0) * 0.5 * 3.0 / k, "scaled average")
    assert_matches(grouped[0], reference_allreduce(la, "Sum"), "grouped [0]")
    assert_matches(grouped[1], reference_allreduce(lb, "Sum"), "grouped [1]")
    assert_matches(in_place[0], reference_allreduce(la, "Average"), "grouped_ [0]")
    assert_matches(in_place[1], reference_allreduce(lb, "Average"), "grouped_ [1]")


@pytest.mark.parametrize("kind", ["without_last", "partition"])
def test_allgather(kind):
    ranks = set_ranks("without_last") if kind == "without_last" else my_partition()
    # a different first dimension per member: its global rank + 1 rows
    inputs = {r: values(("ps-ag", kind), r, torch.float32, (r + 1, 2)) for r in ranks}
    ints = {r: values(("ps-ag-i", kind), r, torch.int64, (2,)) for r in ranks}
    ctx = added(ranks) if kind == "without_last" else partition()
    with ctx as ps:
        if hvd.rank() not in ranks:
            return
        out = hvd.allgather(inputs[hvd.rank()], name="ps.ag", process_set=ps)
        g0, g1 = hvd.grouped_allgather([inputs[hvd.rank()], ints[hvd.rank()]], process_set=ps)
    expected = torch.cat([inputs[r] for r in ranks])
    assert_matches(out, expected, "allgather on %s" % ranks)
    assert_matches(g0, expected, "grouped_allgather [0]")
    assert_matches(g1, torch.cat([ints[r] for r in ranks]), "grouped_allgather [1]")


@pytest.mark.parametrize("kind", ["without_last", "partition"])
def test_broadcast_root_is_a_global_rank(kind):
    ranks = set_ranks("without_last") if kind == "without_last" else my_partition()
    inputs = {r: values(("ps-bc", kind), r, torch.float64, (3, 2)) for r in ranks}
    results = []
    ctx = added(ranks) if kind == "without_last" else partition()
    with ctx as ps:
        if hvd.rank() not in ranks:
            return
        for root in ranks:  # global ranks, as in Horovod
            mine = inputs[hvd.rank()].clone()
            out = hvd.broadcast(mine, root_rank=root, name="ps.bc.%d" % root, process_set=ps)
            buf = inputs[hvd.rank()].clone()
            hvd.broadcast_(buf, root_rank=root, name="ps.bc_.%d" % root, process_set=ps)
            results.append((root, mine, out, buf))
    for root, mine, out, buf in results:
        assert_matches(out, inputs[root], "broadcast from global rank %d" % root)
        assert_matches(buf, inputs[root], "broadcast_ from global rank %d" % root)
        assert torch.equal(mine, inputs[hvd.rank()]), "the input must not be modified"


@pytest.mark.parametrize("kind", ["without_last", "partition"])
def test_alltoall(kind):
    ranks = set_ranks("without_last") if kind == "without_last" else my_partition()
    k = len(ranks)

    def splits_of(r):  # rows member r sends to each member q (by index in the set)
        return [(r + q) % 3 for q in range(k)]

    inputs = {r: values(("ps-a2a", kind), r, torch.float32, (sum(splits_of(r)), 2))
              for r in ranks}
    equal = {r: values(("ps-a2a-eq", kind), r, torch.int32, (2 * k,)) for r in ranks}
    ctx = added(ranks) if kind == "without_last" else partition()
    with ctx as ps:
        if hvd.rank() not in ranks:
            return
        me = hvd.rank()
        out, received = hvd.alltoall(inputs[me], splits=splits_of(me), process_set=ps)
        out_equal = hvd.alltoall(equal[me], process_set=ps)
    i = ranks.index(me)

    def rows_sent(r, q_index, t, splits):
        start = sum(splits[:q_index])
        return t[start:start + splits[q_index]]

    expected = torch.cat([rows_sent(r, i, inputs[r], splits_of(r)) for r in ranks])
    assert_matches(out, expected, "alltoall on %s" % ranks)
    assert received.tolist() == [splits_of(r)[i] for r in ranks]
    expected_equal = torch.cat([equal[r][2 * i:2 * i + 2] for r in ranks])
    assert_matches(out_equal, expected_equal, "alltoall, equal split")


@pytest.mark.parametrize("kind", ["without_last", "partition"])
@pytest.mark.parametrize("op", ["Sum", "Average"])
def test_reducescatter(kind, op):
    ranks = set_ranks("without_last") if kind == "without_last" else my_partition()
    k = len(ranks)
    rows = 5
    inputs = {r: values(("ps-rs", kind, op), r, torch.float64, (rows, 2)) for r in ranks}
    ctx = added(ranks) if kind == "without_last" else partition()
    with ctx as ps:
        if hvd.rank() not in ranks:
            return
        out = hvd.reducescatter(inputs[hvd.rank()], op=getattr(hvd, op), process_set=ps)
        g = hvd.grouped_reducescatter([inputs[hvd.rank()], inputs[hvd.rank()][:3]],
                                      op=getattr(hvd, op), process_set=ps)
    i = ranks.index(hvd.rank())

    def my_share(total):
        shares = [total // k + (1 if q < total % k else 0) for q in range(k)]
        return sum(shares[:i]), shares[i]

    full = reference_allreduce([inputs[r] for r in ranks], op)
    start, count = my_share(rows)
    assert_matches(out, full[start:start + count], "reducescatter on %s" % ranks)
    assert_matches(g[0], full[start:start + count], "grouped_reducescatter [0]")
    start3, count3 = my_share(3)
    full3 = reference_allreduce([inputs[r][:3] for r in ranks], op)
    assert_matches(g[1], full3[start3:start3 + count3], "grouped_reducescatter [1]")


@pytest.mark.parametrize("op", ["Sum", "Average"])
def test_sparse_allreduce(op):
    def sparse_of(r):  # two entries per rank, at rows that overlap between ranks
        dense = torch.zeros(4, 2, dtype=torch.float64)
        v = values(("ps-sparse", op), r, torch.float64, (2,))
        dense[r % 4, 0], dense[(r + 1) % 4, 1] = v[0], v[1]
        return dense.to_sparse()  # (sparse_coo_tensor would warn on torch 2.x)

    with partition() as ps:
        ranks = ps.ranks
        handle = hvd.sparse_allreduce_async(sparse_of(hvd.rank()), name="ps.sparse",
                                            op=getattr(hvd, op), process_set=ps)
        out = handle()
    expected = torch.stack([sparse_of(r).to_dense() for r in ranks]).sum(0)
    if op == "Average":
        expected = expected / len(ranks)
    assert out.is_sparse
    assert_matches(out.to_dense(), expected, "sparse allreduce on %s" % ranks)


def test_barrier():
    with partition() as ps:
        hvd.barrier(process_set=ps)
        hvd.barrier(ps)
    hvd.barrier(process_set=hvd.global_process_set)


def test_objects_on_a_set():
    with partition() as ps:
        ranks = ps.ranks
        root = ranks[-1]
        obj = {"from": hvd.rank(), "list": [1, 2, hvd.rank()]} if hvd.rank() == root else None
        got = hvd.broadcast_object(obj, root_rank=root, process_set=ps)
        everyone = hvd.allgather_object(("rank", hvd.rank()), process_set=ps)
    assert got == {"from": root, "list": [1, 2, root]}
    assert everyone == [("rank", r) for r in ranks]


def test_broadcast_parameters_and_optimizer_state_on_a_set():
    with partition() as ps:
        root = ps.ranks[0]
        torch.manual_seed(100 + hvd.rank())  # different on every rank
        model = torch.nn.Linear(3, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1 * (hvd.rank() + 1), momentum=0.9)
        hvd.broadcast_parameters(model.state_dict(), root_rank=root, process_set=ps)
        hvd.broadcast_optimizer_state(opt, root_rank=root, process_set=ps)
    torch.manual_seed(100 + root)
    expected = torch.nn.Linear(3, 2)
    for name, value in expected.state_dict().items():
        assert torch.equal(model.state_dict()[name], value), name
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1 * (root + 1))


# ---- a set without the last rank works while the last rank is elsewhere ------------------------


def test_set_without_the_last_rank_does_not_need_it():
    n = hvd.size()
    last = n - 1
    ranks = set_ranks("without_last")
    inputs = {r: values("ps-alone", r, torch.float64, (4,)) for r in ranks}
    with added(ranks) as ps:
        result = torch.zeros(4, dtype=torch.float64)
        if hvd.rank() != last:
            # The last rank is blocked meanwhile in a global broadcast that needs rank 0, which
            # only joins it once its set's operations have completed: they cannot need it.
            total = hvd.allreduce(inputs[hvd.rank()], op=hvd.Sum, process_set=ps)
            gathered = hvd.allgather(inputs[hvd.rank()], process_set=ps)
            first = hvd.broadcast(inputs[hvd.rank()], root_rank=0, process_set=ps)
            hvd.barrier(process_set=ps)
            result = total + gathered.sum() + first
        hvd.broadcast_(result, root_rank=0, name="ps.alone.result")
    members = [inputs[r] for r in ranks]
    expected = torch.stack(members).sum(0) + torch.cat(members).sum() + inputs[0]
    assert_matches(result, expected, "what the set computed without rank %d" % last)


def test_unnamed_operations_on_a_set_do_not_shift_global_names():
    # Unnamed operations are numbered per process set: members running unnamed operations on
    # their set leave the numbering of the global set alone, so the next unnamed global
    # operation still matches across ranks.
    ranks = set_ranks("without_last")
    with added(ranks) as ps:
        if ps.included():
            for _ in range(3):
                hvd.allreduce(torch.ones(2), process_set=ps)
    out = hvd.allreduce(torch.ones(2), op=hvd.Sum)
    assert_matches(out, torch.full((2,), float(hvd.size())), "unnamed global allreduce")


# ---- autograd on a set ------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["Sum", "Average"])
def test_allreduce_gradient_on_a_set(op):
    with partition() as ps:
        ranks = ps.ranks
        inputs = {r: values(("ps-grad", op), r, torch.float64, (2, 3)) for r in ranks}
        ws = {r: values(("ps-grad-w", op), r, torch.float64, (2, 3)) for r in ranks}
        x = inputs[hvd.rank()].clone().requires_grad_(True)
        y = hvd.allreduce(x, op=getattr(hvd, op), prescale_factor=2.0, process_set=ps)
        (y * ws[hvd.rank()]).sum().backward()
    assert_matches(y.detach(), reference_allreduce([inputs[r] for r in ranks], op, 2.0),
                   "forward")
    # Horovod's rule: the gradient is the allreduce, on the same set, of the output's gradient
    assert_matches(x.grad, reference_allreduce([ws[r] for r in ranks], op, 2.0), "gradient")


def test_allgather_broadcast_reducescatter_alltoall_gradients_on_a_set():
    with partition() as ps:
        ranks = ps.ranks
        k, i = len(ranks), ranks.index(hvd.rank())
        total = sum(r + 1 for r in ranks)
        ws = {r: values("ps-ag-w", r, torch.float64, (total, 2)) for r in ranks}
        x = values("ps-ag-x", hvd.rank(), torch.float64, (hvd.rank() + 1, 2)).requires_grad_()
        (hvd.allgather(x, process_set=ps) * ws[hvd.rank()]).sum().backward()

        root = ranks[-1]
        wb = {r: values("ps-bc-w", r, torch.float64, (3,)) for r in ranks}
        xb = torch.zeros(3, dtype=torch.float64, requires_grad=True)
        (hvd.broadcast(xb, root_rank=root, process_set=ps) * wb[hvd.rank()]).sum().backward()

        rows = 2 * k
        wr = {r: values("ps-rs-w", r, torch.float64, (2, 2)) for r in ranks}
        xr = torch.zeros(rows, 2, dtype=torch.float64, requires_grad=True)
        (hvd.reducescatter(xr, op=hvd.Average, process_set=ps) * wr[hvd.rank()]).sum().backward()
        xg = torch.zeros(rows, 2, dtype=torch.float64, requires_grad=True)
        (hvd.grouped_reducescatter([xg], op=hvd.Sum, process_set=ps)[0]
         * wr[hvd.rank()]).sum().backward()

        # alltoall, one row to each member: member q's output row i came from member i
        wa = {r: values("ps-a2a-w", r, torch.float64, (k, 2)) for r in ranks}
        xa = torch.zeros(k, 2, dtype=torch.float64, requires_grad=True)
        (hvd.alltoall(xa, process_set=ps) * wa[hvd.rank()]).sum().backward()
    # allgather: the set's average of the output gradients, this member's rows
    offset = sum(r + 1 for r in ranks[:i])
    mean_w = torch.stack([ws[r] for r in ranks]).mean(0)
    assert_matches(x.grad, mean_w[offset:offset + hvd.rank() + 1], "allgather gradient")
    # broadcast: the set's average on the root (a global rank), zero elsewhere
    expected_b = torch.stack([wb[r] for r in ranks]).mean(0) if hvd.rank() == root else \
        torch.zeros(3, dtype=torch.float64)
    assert_matches(xb.grad, expected_b, "broadcast gradient")
    # reducescatter (Average over the set): Horovod's gradient, every member's rows gathered
    # (k times the adjoint, which divides by k)
    assert_matches(xr.grad, torch.cat([wr[r] for r in ranks]), "reducescatter gradient")
    # grouped, Sum: that times the set's size (not the world's)
    assert_matches(xg.grad, torch.cat([wr[r] for r in ranks]) * k,
                   "grouped_reducescatter gradient")
    # alltoall: the gradient of the row sent to member j is j's output gradient at row i
    assert_matches(xa.grad, torch.stack([wa[r][i] for r in ranks]), "alltoall gradient")


def test_distributed_optimizer_on_a_set():
    ranks = set_ranks("without_last")
    lr = 0.5

    def grads_of(r):
        torch.manual_seed(7)
        model = torch.nn.Linear(3, 2)
        x = values("ps-opt-x", r, torch.float32, (4, 3))
        model(x).pow(2).sum().backward()
        return [p.grad.clone() for p in model.parameters()], [p.detach().clone()
                                                              for p in model.parameters()]

    with added(ranks) as ps:
        torch.manual_seed(7)
        model = torch.nn.Linear(3, 2)
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=lr),
                                       named_parameters=model.named_parameters(),
                                       process_set=ps)
        x = values("ps-opt-x", hvd.rank(), torch.float32, (4, 3))
        model(x).pow(2).sum().backward()
        opt.step()
    start = grads_of(0)[1]
    if hvd.rank() in ranks:
        grads = [torch.stack(g).mean(0) for g in zip(*[grads_of(r)[0] for r in ranks])]
    else:
        grads = grads_of(hvd.rank())[0]  # outside the set: its own gradients
    for p, p0, g in zip(model.parameters(), start, grads):
        torch.testing.assert_close(p.detach(), p0 - lr * g, rtol=1e-5, atol=1e-6)
