"""hvd.start_timeline / hvd.stop_timeline (Horovod's API): rank 0 writes a valid Chrome trace
with every phase of a fused all-reduce and every rank's ready mark; the other ranks write
nothing. (KOLO_TIMELINE / HOROVOD_TIMELINE from the start: tests/mpi/check_timeline_*.sh.)"""
import os
import pathlib
import tempfile

import pytest
import torch

import kolo.torch as hvd
import timeline_check


def _path(tag):
    # Every rank passes a path of its own; only rank 0's may exist afterwards.
    return pathlib.Path(tempfile.gettempdir()) / (
        "kolo-test-timeline-%s-%d-rank%d.json" % (tag, os.getpid(), hvd.rank()))


def test_start_stop_timeline_records_every_phase():
    path = _path("phases")
    hvd.start_timeline(path, mark_cycles=True)  # os.PathLike accepted
    try:
        # So that no rank submits before rank 0 records: its Requests would reach the
        # coordinator unmarked.
        hvd.barrier()
        # A burst of small tensors, which the runtime fuses, and a float16 one, which always
        # goes through the fusion buffer (widened to float32), so the copies are there.
        tensors = [torch.full((17,), float(hvd.rank() + 1)) for _ in range(8)]
        handles = [hvd.allreduce_async(t, name="tl.%d" % i, op=hvd.Sum)
                   for i, t in enumerate(tensors)]
        half = hvd.allreduce(torch.ones(5, dtype=torch.float16), name="tl.half", op=hvd.Sum)
        outs = [hvd.synchronize(h) for h in handles]
    finally:
        hvd.stop_timeline()
    total = sum(range(1, hvd.size() + 1))
    for out in outs:
        assert torch.all(out == total)
    assert torch.all(half == hvd.size())
    if hvd.rank() != 0:
        assert not path.exists()
        return
    try:
        summary = timeline_check.check(timeline_check.load(str(path)), ranks=hvd.size(),
                                       phases=True, complete=True, cycles=True)
    finally:
        path.unlink()
    for i in range(8):
        assert "allreduce.tl.%d" % i in summary["names"]
    assert "allreduce.tl.half" in summary["names"]


def test_start_timeline_unwritable_path_is_a_value_error_on_rank_0():
    path = "/nonexistent-kolo-dir/rank%d/timeline.json" % hvd.rank()
    if hvd.rank() == 0:
        with pytest.raises(ValueError, match="nonexistent-kolo-dir"):
            hvd.start_timeline(path)
    else:
        hvd.start_timeline(path)  # only rank 0 writes a timeline: a no-op here
    hvd.stop_timeline()
    # The runtime goes on as before.
    assert torch.all(hvd.allreduce(torch.ones(3), name="tl.after", op=hvd.Sum) == hvd.size())


def test_stop_timeline_without_start_is_a_no_op():
    hvd.stop_timeline()
    hvd.stop_timeline()
