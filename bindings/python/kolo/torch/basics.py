"""kolo.torch's basics: reduction codes, error types, dtypes, the rank layout and the build
flags (Horovod's names). Process sets are in process_sets, the collective operations in mpi_ops.
"""

import ctypes
import functools
import os

import torch

from kolo import _kolo as _k

# ---- reduction operations (kolo's codes, which are Horovod's numbers) ----------------------------

Average = _k.AVERAGE
Sum = _k.SUM
Adasum = _k.ADASUM
Min = _k.MIN
Max = _k.MAX
Product = _k.PRODUCT

_OP_NAMES = {Average: "Average", Sum: "Sum", Adasum: "Adasum", Min: "Min", Max: "Max",
             Product: "Product"}

# ---- errors ---------------------------------------------------------------------------------


class HorovodInternalError(_k.KoloError):
    """A kolo operation failed (a mismatch between ranks, a refused submission, a lost peer, a
    shutdown...). Horovod's name for it, so ``except hvd.HorovodInternalError`` keeps working.
    It is a RuntimeError and a ``kolo.KoloError``; the message is the runtime's and ``code`` its
    kolo_status_t."""


class UnsupportedTensorError(TypeError, ValueError):
    """A tensor kolo cannot communicate: a dtype it lacks, a device other than the CPU, a sparse
    layout. Both a TypeError and a ValueError (Horovod raises ValueError for these)."""


class InvalidSubmissionError(HorovodInternalError, ValueError):
    """kolo refused a submission as invalid (a name still in flight, a bad op...): a
    HorovodInternalError that is also a ValueError, which is what Horovod raises for an invalid
    argument at submission."""


_INVALID_ARGUMENT = 3  # kolo_status_t KOLO_ERR_INVALID_ARGUMENT


def _internal_error(e, at_submission=False):
    code = getattr(e, "code", None)
    if at_submission and code == _INVALID_ARGUMENT:
        err = InvalidSubmissionError(str(e))
    else:
        err = HorovodInternalError(str(e))
    err.code = code
    return err


_NOT_INITIALIZED = "kolo has not been initialized; use hvd.init()."

# ---- dtypes ---------------------------------------------------------------------------------

_DTYPES = {
    torch.uint8: _k.UINT8,
    torch.int8: _k.INT8,
    torch.int16: _k.INT16,
    torch.int32: _k.INT32,
    torch.int64: _k.INT64,
    torch.float16: _k.FLOAT16,
    torch.bfloat16: _k.BFLOAT16,
    torch.float32: _k.FLOAT32,
    torch.float64: _k.FLOAT64,
    torch.bool: _k.BOOL,
}
if getattr(torch, "uint16", None) is not None:  # torch >= 2.3
    _DTYPES[torch.uint16] = _k.UINT16

# ---- layout and build ---------------------------------------------------------------------

def is_initialized():
    """True when init() succeeded and shutdown() has not been called since."""
    return bool(_k.is_initialized())


def _layout(value):
    if value < 0:
        raise ValueError(_NOT_INITIALIZED)
    return value


def size():
    """The number of ranks."""
    return _layout(_k.size())


def local_size():
    """The number of ranks on this node."""
    return _layout(_k.local_size())


def cross_size():
    """The number of nodes with a rank of this local rank."""
    return _layout(_k.cross_size())


def rank():
    """This process's rank, in [0, size())."""
    return _layout(_k.rank())


def local_rank():
    """This process's rank on its node."""
    return _layout(_k.local_rank())


def cross_rank():
    """This process's rank among the ranks of the same local rank (its node's index)."""
    return _layout(_k.cross_rank())


def mpi_threads_supported():
    """True when MPI provides MPI_THREAD_MULTIPLE."""
    if not _k.is_initialized():
        raise ValueError(_NOT_INITIALIZED)
    return bool(_k.mpi_threads_supported())


def mpi_enabled():
    """kolo always communicates over MPI."""
    return True


def mpi_built():
    return True


def gloo_enabled():
    return False


def gloo_built():
    return False


def nccl_built():
    """Horovod's value: an int, the NCCL version code kolo was built with (NCCL_VERSION_CODE,
    e.g. 22809 for NCCL 2.28.9), or 0 when kolo was built without NCCL."""
    if not _k.built_with_nccl():
        return 0
    version = getattr(_k, "nccl_version", None)
    if version is not None:
        return int(version())
    return _loaded_nccl_version()


@functools.lru_cache(maxsize=None)
def _loaded_nccl_version():
    """For an extension that does not report NCCL's version: the version code of the
    libnccl.so.2 that kolo loads at run time (ncclGetVersion), or 1 (built with NCCL, version
    unknown) when it cannot be loaded."""
    try:
        lib = ctypes.CDLL("libnccl.so.2")
        code = ctypes.c_int(0)
        if lib.ncclGetVersion(ctypes.byref(code)) == 0 and code.value > 0:
            return int(code.value)
    except (OSError, AttributeError):
        pass
    return 1


def cuda_built():
    """True when kolo was built with CUDA."""
    return bool(_k.built_with_cuda())


def rocm_built():
    return False


def ccl_built():
    return False


def ddl_built():
    return False


def start_timeline(file_path, mark_cycles=False):
    """Starts writing a timeline to ``file_path``: a Chrome trace of every tensor's negotiation
    and execution (open it in Perfetto or chrome://tracing), as ``HOROVOD_TIMELINE`` /
    ``KOLO_TIMELINE`` do from the start. A timeline being written is closed first. Only rank 0
    writes one; on the other ranks this does nothing, so every rank may call it.

    Arguments:
        file_path: the file to create (or truncate), a str or os.PathLike.
        mark_cycles: mark the start of every background cycle (``HOROVOD_TIMELINE_MARK_CYCLES``).

    Raises ValueError when kolo is not initialized, or when rank 0 cannot write ``file_path``.
    """
    if not _k.is_initialized():
        raise ValueError(_NOT_INITIALIZED)
    try:
        _k.start_timeline(os.fspath(file_path), bool(mark_cycles))
    except _k.KoloError as e:
        if getattr(e, "code", None) == _INVALID_ARGUMENT:
            raise ValueError(str(e)) from None
        raise _internal_error(e) from None


def stop_timeline():
    """Stops the timeline: spans still open end now, and the file is closed (a valid JSON array).
    Does nothing when no timeline is being written. Raises ValueError when kolo is not
    initialized."""
    if not _k.is_initialized():
        raise ValueError(_NOT_INITIALIZED)
    try:
        _k.stop_timeline()
    except _k.KoloError as e:
        raise _internal_error(e) from None
