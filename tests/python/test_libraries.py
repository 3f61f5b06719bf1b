"""The libraries a rank has mapped once kolo is initialised (conftest.py's hvd.init()): started
without MPI (torchrun's variables, as kolo.local_launch sets them), no MPI library at all, not
even kolo's MPI plugin; started by mpirun, both. runtime/world/mpi_plugin.h says why."""
import os

import kolo.torch as hvd

WITHOUT_MPI = "OMPI_COMM_WORLD_SIZE" not in os.environ and "MASTER_ADDR" in os.environ

# Open MPI's libraries and PMIx, and kolo's plugin that links them.
MPI_LIBRARIES = ("libmpi.", "libmpi_", "libopen-pal.", "libopen-rte.", "libpmix.", "libkolo_mpi.")


def mapped_libraries():
    """The file names of the shared objects this process has mapped."""
    with open("/proc/self/maps") as f:
        return {os.path.basename(line.split()[-1]) for line in f if ".so" in line}


def test_mpi_is_loaded_only_by_a_start_over_mpi():
    assert hvd.is_initialized()
    names = mapped_libraries()
    assert any(n.startswith("libkolo.") for n in names), sorted(names)
    mpi = sorted(n for n in names if n.startswith(MPI_LIBRARIES))
    if WITHOUT_MPI:
        assert mpi == [], "started without MPI, yet mapped: %s" % ", ".join(mpi)
    else:
        for prefix in ("libmpi.", "libkolo_mpi."):
            assert any(n.startswith(prefix) for n in mpi), (prefix, mpi)
