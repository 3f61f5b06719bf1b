"""hvd.init(comm=...) as in Horovod: a list of MPI_COMM_WORLD ranks (only they start kolo, in the
order given), an mpi4py communicator (where mpi4py is installed), and the arguments it refuses.
Each test shuts down the suite's kolo (over MPI_COMM_WORLD), starts it on the subset, and
starts it again over MPI_COMM_WORLD on every rank at the end, so the suite's own exchanges work.
"""
import os
import time

import pytest
import torch

import kolo.torch as hvd
from kolo_reference import assert_matches, rank_values, reference_allreduce


# Started the way torchrun starts processes (kolo.local_launch): no MPI ranks to name.
WITHOUT_MPI = "OMPI_COMM_WORLD_SIZE" not in os.environ and "MASTER_ADDR" in os.environ
needs_mpi = pytest.mark.skipif(
    WITHOUT_MPI, reason="kolo_init_ranks and kolo_init_comm name MPI ranks; a start without MPI "
    "refuses them (test_without_mpi_a_list_of_ranks_is_refused)")


def _restart_on_world():
    hvd.shutdown()
    hvd.init()


def _subset_allreduce(key, world_members, world_rank, process_set=hvd.global_process_set):
    """An allreduce on `process_set` of the current kolo world, whose members are the world
    ranks world_members (in kolo's rank order); the reference comes from exactly their inputs."""
    n = len(world_members)
    inputs = [rank_values(key, r, torch.int64, (9, 3), "Sum", n) for r in world_members]
    out = hvd.allreduce(inputs[world_members.index(world_rank)], op=hvd.Sum, name=key,
                        process_set=process_set)
    assert_matches(out, reference_allreduce(inputs, "Sum"), "allreduce over %s" % world_members)


@needs_mpi
def test_a_list_of_ranks_starts_kolo_on_them_alone():
    world_rank, world_size = hvd.rank(), hvd.size()
    members = [world_size - 1, 0]  # kolo rank 0 is the last world rank
    hvd.shutdown()
    try:
        if world_rank not in members:
            start = time.monotonic()
            with pytest.raises(ValueError, match=r"kolo_init_ranks \[%d,0\]: this process "
                               r"\(MPI_COMM_WORLD rank %d\) is not listed"
                               % (world_size - 1, world_rank)):
                hvd.init(comm=members)
            assert time.monotonic() - start < 2, "a rank left out waited for the others"
            assert not hvd.is_initialized()
            return
        hvd.init(comm=members)
        assert hvd.size() == 2
        assert hvd.rank() == members.index(world_rank)
        assert 0 <= hvd.local_rank() < hvd.local_size() <= 2
        _subset_allreduce("init_comm.pair", members, world_rank)
        # Process sets are made of kolo ranks: [0] is the last world rank.
        ps = hvd.add_process_set([0])
        if hvd.rank() == 0:
            _subset_allreduce("init_comm.set", [world_size - 1], world_rank, ps)
        assert hvd.remove_process_set(ps)
    finally:
        _restart_on_world()
    assert hvd.size() == world_size and hvd.rank() == world_rank


@needs_mpi
@pytest.mark.parametrize("comm,message", [
    ([], "empty"),
    ([0, 0], "listed twice"),
    ([0, 99], r"outside MPI_COMM_WORLD \[0, "),
    (["0"], "must hold ints"),
    ("world", "takes None, a list of MPI_COMM_WORLD ranks or an mpi4py communicator"),
])
def test_arguments_it_refuses_fail_at_once_on_every_rank(comm, message):
    hvd.shutdown()
    try:
        start = time.monotonic()
        with pytest.raises(ValueError, match=message):
            hvd.init(comm=comm)
        assert time.monotonic() - start < 2
        assert not hvd.is_initialized()
    finally:
        _restart_on_world()


@needs_mpi
def test_an_mpi4py_communicator_is_duplicated():
    MPI = pytest.importorskip("mpi4py.MPI")
    world_rank, world_size = hvd.rank(), hvd.size()
    # Even and odd ranks, each in reverse order: two kolo worlds side by side.
    comm = MPI.COMM_WORLD.Split(world_rank % 2, -world_rank)
    members = [r for r in reversed(range(world_size)) if r % 2 == world_rank % 2]
    hvd.shutdown()
    try:
        hvd.init(comm=comm)
        comm.Free()  # kolo keeps its own duplicate
        assert hvd.size() == len(members) and hvd.rank() == members.index(world_rank)
        _subset_allreduce("init_comm.mpi4py", members, world_rank)
    finally:
        _restart_on_world()


@needs_mpi
def test_a_fortran_handle_that_names_no_communicator_fails_at_once_on_every_rank():
    """The path of an mpi4py communicator (kolo_init_comm_fortran), given a handle no
    communicator has: an error naming it, not MPI's abort."""
    from kolo import _kolo
    hvd.shutdown()
    try:
        with pytest.raises(_kolo.KoloError, match="the Fortran handle 1234567 names no "
                           "communicator"):
            _kolo.init_comm(1234567)
        assert not hvd.is_initialized()
    finally:
        _restart_on_world()


@pytest.mark.skipif(not WITHOUT_MPI, reason="the refusal of a start without MPI")
def test_without_mpi_a_list_of_ranks_is_refused():
    hvd.shutdown()
    try:
        with pytest.raises(Exception, match=r"kolo_init_ranks: this process was started without "
                           r"MPI .*use process sets"):
            hvd.init(comm=[0])
        assert not hvd.is_initialized()
    finally:
        _restart_on_world()
