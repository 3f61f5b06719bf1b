"""kolo as a torch.distributed backend: ``dist.init_process_group("kolo")``.

    import kolo.torch.distributed  # registers the backend "kolo"
    dist.init_process_group("kolo")
    model = torch.nn.parallel.DistributedDataParallel(model)

Launch as for any torch.distributed job: ``torchrun``, kolo's launchers (``kolorun``,
``python -m kolo.local_launch``), or ``mpirun``. What the backend does with each collective is
in process_group.py, how it names them in names.py, how their Works complete in work.py.

Start-up. The backend starts kolo itself (kolo.torch.init()) when the default group is made:
- under an MPI launcher kolo starts over MPI. torch's env:// start needs RANK, WORLD_SIZE,
  MASTER_ADDR and MASTER_PORT, which mpirun does not set: importing this module under an MPI
  launcher sets those that are missing (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE from the
  launcher; MASTER_ADDR and MASTER_PORT by starting kolo at import and broadcasting rank 0's
  host name and a port free on it), so an unmodified script runs under mpirun;
- otherwise (torchrun, env:// variables) kolo starts without MPI over its TCP rendezvous. Its
  port, token and address come through torch's store from rank 0 (a port free on MASTER_ADDR, or
  on rank 0's host name where MASTER_ADDR is unset, as with ``init_method="tcp://..."``), so
  kolo never competes with torch's store for MASTER_PORT.
kolo's rank and size must then be torch's: a ``rank``/``world_size`` argument that differs from
the launcher's is refused, naming both. If kolo was initialised before (``hvd.init()``), the
backend uses it as it is.

Groups. ``dist.new_group(ranks)`` becomes a kolo process set. kolo adds a set collectively over
every rank, and torch's new_group is called by every rank too, but torch calls a backend only on
the group's members; so this module wraps ``new_group`` (torch.distributed's and the modules
that imported it) to add the set on every rank first. A group of every rank uses kolo's global
set. ``use_local_synchronization=True`` (only the members call) is refused.

Errors. A failed collective raises ``torch.distributed.DistBackendError`` (RuntimeError on
torch 1.13, which lacks it) from ``work.wait()``, and sets its Future's exception, with kolo's
message: which collective, its number in the group, and what kolo found (the ranks and values of
a mismatch, what each rank waits for in a deadlock, the rank that was lost).
"""

import os
import socket
import sys
import threading
import uuid

import torch.distributed as dist
import torch.distributed.distributed_c10d as _c10d

from kolo import _kolo as _k
from kolo.local_launch import free_port
from kolo.torch.distributed.process_group import ProcessGroupKolo

__all__ = ["ProcessGroupKolo", "register"]

BACKEND = "kolo"
# The variables of an MPI launcher's ranks: (rank, size, local rank, local size).
_MPI_LAUNCHERS = (
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
)
_STORE_PREFIX = "kolo/"

_lock = threading.Lock()
_group_counter = [0]   # groups made so far; the default group is 0
_next_set = []         # (process set id, global ranks, group index) for the group being made


def _mpi_launcher():
    for names in _MPI_LAUNCHERS:
        if names[0] in os.environ and names[1] in os.environ:
            return names
    return None


def _host_address():
    """An address of this host that peers can reach (where MASTER_ADDR does not say)."""
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def _fill_env_under_mpi():
    """torch's env:// variables from an MPI launcher's (see the module's text)."""
    names = _mpi_launcher()
    if names is None:
        return
    for var, src in zip(("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"), names):
        if src in os.environ:
            os.environ.setdefault(var, os.environ[src])
    if os.environ.get("MASTER_ADDR") and os.environ.get("MASTER_PORT"):
        return
    import kolo.torch as hvd  # noqa: PLC0415 - only under an MPI launcher
    from kolo.torch.functions import broadcast_object  # noqa: PLC0415
    hvd.init()
    mine = None
    if hvd.rank() == 0:
        addr = os.environ.get("MASTER_ADDR") or (
            "127.0.0.1" if hvd.local_size() == hvd.size() else _host_address())
        mine = (addr, os.environ.get("MASTER_PORT") or str(free_port(addr)))
    addr, port = broadcast_object(mine, root_rank=0, name="kolo.torch.distributed.master")
    os.environ.setdefault("MASTER_ADDR", addr)
    os.environ.setdefault("MASTER_PORT", port)


def _agree_on_rendezvous(store, rank):
    """kolo's TCP rendezvous address, port and job token, from rank 0 through torch's store."""
    if rank == 0:
        addr = os.environ.get("MASTER_ADDR") or _host_address()
        port = os.environ.get("KOLO_MASTER_PORT") or str(free_port(addr))
        token = os.environ.get("KOLO_JOB_ID") or "torch-" + uuid.uuid4().hex[:12]
        store.set(_STORE_PREFIX + "rendezvous", "%s %s %s" % (addr, port, token))
    value = store.get(_STORE_PREFIX + "rendezvous")
    addr, port, token = (value.decode() if isinstance(value, bytes) else value).split(" ")
    os.environ["MASTER_ADDR"] = addr
    os.environ["KOLO_MASTER_PORT"] = port
    os.environ["KOLO_JOB_ID"] = token
    # kolo's start without MPI needs MASTER_PORT set (it serves on KOLO_MASTER_PORT); with
    # init_method="tcp://..." torch never set it.
    os.environ.setdefault("MASTER_PORT", port)


def _start_kolo(store, rank, world_size):
    import kolo.torch as hvd  # noqa: PLC0415 - kolo.torch imports torch.distributed's users
    if not _k.is_initialized():
        launched = (os.environ.get("RANK"), os.environ.get("WORLD_SIZE"))
        if _mpi_launcher() is None and None in launched:
            # No launcher's ranks (init_method="tcp://..." or "file://..." with explicit
            # ranks): kolo takes torch's.
            os.environ["RANK"] = str(rank)
            os.environ["WORLD_SIZE"] = str(world_size)
        elif launched != (str(rank), str(world_size)):
            # The launcher's ranks are kolo's; refused below, on every rank, without starting
            # kolo on ranks that do not match (torch's store has already met every rank).
            raise _rank_mismatch(rank, world_size, launched)
        if _mpi_launcher() is None:
            _agree_on_rendezvous(store, rank)
        hvd.init()
    if _k.rank() != rank or _k.size() != world_size:
        raise _rank_mismatch(rank, world_size, (str(_k.rank()), str(_k.size())))


def _rank_mismatch(rank, world_size, launched):
    return ValueError(
        "kolo backend: torch.distributed says rank %d of %d, but kolo runs as rank %s of %s "
        "(from %s): pass no rank/world_size to init_process_group, or the launcher's"
        % (rank, world_size, launched[0], launched[1],
           "the MPI launcher" if _mpi_launcher() else "RANK/WORLD_SIZE"))


def _create(store, rank, world_size, timeout, *unused):
    """torch's backend creator: the default group, or a group new_group prepared."""
    with _lock:
        prepared = _next_set.pop() if _next_set else None
    if prepared is None:
        if dist.is_initialized():
            raise ValueError("kolo backend: a group made without torch.distributed.new_group "
                             "(import kolo.torch.distributed before making groups)")
        _start_kolo(store, rank, world_size)
        set_id, ranks, index = 0, list(range(world_size)), 0
    else:
        set_id, ranks, index = prepared
    if len(ranks) != world_size or ranks.index(_k.rank()) != rank:
        raise ValueError("kolo backend: torch made group rank %d of %d, kolo's set has ranks %s "
                         "and this is global rank %d" % (rank, world_size, ranks, _k.rank()))
    return ProcessGroupKolo(rank, world_size, set_id, ranks, index)


# ---- new_group ----------------------------------------------------------------------------

_torch_new_group = _c10d.new_group
_sets_by_ranks = {}  # tuple of global ranks -> kolo process set id


def _uses_kolo(backend):
    if backend is None:
        return dist.is_initialized() and dist.get_backend() == BACKEND
    return str(backend).lower() == BACKEND


def new_group(ranks=None, *args, **kwargs):
    """torch.distributed.new_group, adding a kolo process set on every rank first when the group
    is kolo's (see the module's text). Arguments as torch's."""
    backend = kwargs.get("backend", args[1] if len(args) > 1 else None)
    if not _uses_kolo(backend):
        return _torch_new_group(ranks, *args, **kwargs)
    if kwargs.get("use_local_synchronization"):
        raise ValueError("kolo backend: new_group(use_local_synchronization=True) is not "
                         "supported: kolo adds a process set on every rank of the job")
    world = _k.size()
    members = sorted(set(int(r) for r in ranks)) if ranks else list(range(world))
    with _lock:
        _group_counter[0] += 1
        index = _group_counter[0]
    if members == list(range(world)):
        set_id = 0
    elif tuple(members) in _sets_by_ranks:
        set_id = _sets_by_ranks[tuple(members)]
    else:
        import kolo.torch as hvd  # noqa: PLC0415
        set_id = hvd.add_process_set(members).process_set_id
        _sets_by_ranks[tuple(members)] = set_id
    member = _k.rank() in members
    if member:
        with _lock:
            _next_set.append((set_id, members, index))
    try:
        return _torch_new_group(ranks, *args, **kwargs)
    finally:
        if member:
            with _lock:
                if _next_set and _next_set[-1][2] == index:
                    _next_set.pop()  # torch refused before calling the backend


def _install_new_group():
    for module in list(sys.modules.values()):
        if getattr(module, "new_group", None) is _torch_new_group:
            module.new_group = new_group


def register():
    """Registers the backend "kolo" with torch.distributed (done when this module is imported;
    again is harmless). torch >= 2.14 calls it through kolo's entry point in the group
    ``torch.distributed.backends`` when a group of backend "kolo" is made."""
    try:
        dist.Backend.register_backend(BACKEND, _create, devices=["cpu", "cuda"])
    except TypeError:  # torch < 2.0: no devices argument
        dist.Backend.register_backend(BACKEND, _create)
    except ValueError:
        pass  # registered already (a reload)
    _install_new_group()


register()
_fill_env_under_mpi()
