"""Grouped operations are all-or-nothing (the runtime's kolo_grouped_*): a group is negotiated
and executed as one, so when one member fails on any rank, every member fails on every rank;
a good group's results match references computed from every rank's known inputs."""
import pytest
import torch

import kolo.torch as hvd


def _inputs(step):
    r = hvd.rank()
    return [torch.full((3, 4), float(r + step)), torch.arange(5, dtype=torch.int64) * (r + 1),
            torch.full((7,), float(r), dtype=torch.float64)]


def test_grouped_allreduce_matches_reference_over_repeated_steps():
    n = hvd.size()
    for step in range(4):  # later steps are served by the response cache
        out = hvd.grouped_allreduce(_inputs(step), name="grouped.ok", op=hvd.Sum)
        assert torch.equal(out[0], torch.full((3, 4), float(sum(r + step for r in range(n)))))
        assert torch.equal(out[1], torch.arange(5, dtype=torch.int64) * sum(r + 1 for r in range(n)))
        assert torch.equal(out[2], torch.full((7,), float(sum(range(n))), dtype=torch.float64))


def test_one_mismatched_member_fails_every_member_on_every_rank():
    last = hvd.size() - 1
    tensors = _inputs(0)
    if hvd.rank() == last:
        tensors[1] = torch.arange(6, dtype=torch.int64)  # one member's shape differs here
    handle = hvd.grouped_allreduce_async(tensors, name="grouped.bad", op=hvd.Sum)
    with pytest.raises(hvd.HorovodInternalError) as info:
        hvd.synchronize(handle)
    message = str(info.value)
    assert "shape mismatch" in message, message
    # The group works again afterwards, under the same name.
    out = hvd.grouped_allreduce(_inputs(1), name="grouped.bad", op=hvd.Sum)
    assert out[0].shape == (3, 4)


def test_grouped_allgather_and_reducescatter():
    n, r = hvd.size(), hvd.rank()
    gathered = hvd.grouped_allgather([torch.full((r + 1, 2), float(r)),
                                      torch.full((1,), float(r))], name="grouped.ag")
    expected0 = torch.cat([torch.full((q + 1, 2), float(q)) for q in range(n)])
    assert torch.equal(gathered[0], expected0)
    assert torch.equal(gathered[1], torch.arange(n, dtype=torch.float32))
    shares = hvd.grouped_reducescatter([torch.ones(n, 3) * (r + 1), torch.ones(2 * n)],
                                       name="grouped.rs", op=hvd.Sum)
    assert torch.equal(shares[0], torch.full((1, 3), float(n * (n + 1) // 2)))
    assert torch.equal(shares[1], torch.full((2,), float(n)))
