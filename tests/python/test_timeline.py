"""hvd.start_timeline / hvd.stop_timeline (Horovod's API): rank 0 writes a valid Chrome trace
with every phase of a fused all-reduce and every rank's ready mark; the other ranks write
nothing. (KOLO_TIMELINE / HOROVOD_TIMELINE from the start: tests/mpi/check_timeline_*.sh.)"""
import os
import pathlib
import tempfile
import time

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
        # A burst of small tensors, which the runtime fuses (without copies where shm reduces
        # them in their own buffers), and a float16 one, which always goes through the fusion
        # buffer (widened to float32), so the copies are there.
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


def test_cached_steps_have_every_ranks_ready_mark():
    # The first step is negotiated by the coordinator; the next two are served from the
    # response cache, the last with the last rank late: its mark must still be there, last.
    path = _path("cached")
    hvd.start_timeline(path)
    try:
        hvd.barrier()
        for step in range(3):
            if step == 2 and hvd.rank() == hvd.size() - 1:
                time.sleep(0.1)
            out = hvd.allreduce(torch.ones(4), name="tl.cached", op=hvd.Sum)
            assert torch.all(out == hvd.size())
    finally:
        hvd.stop_timeline()
    if hvd.rank() != 0:
        return
    try:
        events = timeline_check.load(str(path))
    finally:
        path.unlink()
    pid = [e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name" and
           e["args"]["name"] == "allreduce.tl.cached"]
    assert len(pid) == 1
    row = [e for e in events if e["pid"] == pid[0]]
    # One mark of each rank in each of the three negotiations.
    timeline_check.check(row, ranks=hvd.size(), complete=True, every_step=True)
    negotiations, depth = [], 0
    for e in row:
        if e["ph"] == "B":
            if depth == 0 and e["name"] == "NEGOTIATE_ALLREDUCE":
                negotiations.append({})
            depth += 1
        elif e["ph"] == "E":
            depth -= 1
        elif e["ph"] == "X":
            negotiations[-1][int(e["name"])] = e["ts"]
    assert len(negotiations) == 3
    last = hvd.size() - 1
    if hvd.size() > 1:
        assert max(negotiations[2], key=negotiations[2].get) == last, negotiations[2]


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
