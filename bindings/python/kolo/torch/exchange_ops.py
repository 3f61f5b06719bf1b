"""Horovod's reducescatter, alltoall, barrier and join over kolo's runtime operations.

Same conventions as mpi_ops (int handles for poll()/synchronize(), names "<op>.<name>" or
"<op>.noname.<n>", HorovodInternalError carrying the runtime's message, ``process_set``: the
ranks that take part; inside a set, rank r is the r-th of its ascending ranks). The autograd
rules:
- reducescatter: y_r = s * reduce_q(x_q)[rows of r] with s = prescale * postscale (/ set size
  for Average), so dL/dx_q = s * allgather(dL/dy) — every rank's gradient rows, gathered;
- alltoall: the gradient of what rank r received from q goes back to q: an alltoall of the
  output gradient with the received splits as the send splits (Horovod's rule).
"""

import itertools

import torch

from kolo import _kolo as _k
from kolo.torch import mpi_ops as _ops
from kolo.torch.compression import Compression
from kolo.torch.mpi_ops import Average, Sum, global_process_set
from kolo.torch.process_sets import _as_set, _process_set_id


def _gathered(h, dtype, received_splits=False):
    """The result step of a kolo operation whose output kolo allocated."""
    def finish():
        splits = torch.tensor(h.received_splits(), dtype=torch.int32) if received_splits else None
        out = _ops._dlpack.from_dlpack(h.output())
        if dtype == torch.bool:
            out = out.view(torch.bool)
        return (out, splits) if received_splits else out
    return finish


def _check_reduce_op(op, what):
    if op not in (Average, Sum):
        raise ValueError("kolo %s: op must be Average or Sum, got %r" % (what, op))


# ---- reducescatter --------------------------------------------------------------------------


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Starts reducing ``tensor`` (same shape [n, ...] on every rank) over all ranks and
    scattering the result along the first dimension: rank r receives its share of the rows
    (the first n % size ranks one row more than the others). ``op``: Average or Sum. A CUDA
    tensor is reduced through NCCL (ncclReduceScatter; unequal shares are padded to the
    largest) into a new CUDA tensor on its device; float16/bfloat16 are then summed by NCCL in
    their own type, and int16/uint16/bool or an integer Average are refused (NCCL cannot).

    Returns:
        A handle for poll() and synchronize(); synchronize returns this rank's share.
    """
    set_id = _process_set_id(process_set, "reducescatter")
    handle, full_name = _ops._new_handle("reducescatter", name, set_id)
    what = "reducescatter '%s'" % full_name
    _check_reduce_op(op, what)
    _ops._check_tensor(tensor, what, set_id, cuda_ok=True)
    inp = _ops._contiguous(tensor)
    h = _ops._submit(_k.reducescatter_async, full_name, _ops._capsule(inp),
                     _ops._DTYPES[inp.dtype], int(op), float(prescale_factor),
                     float(postscale_factor), set_id, _ops._ready_stream(inp))
    return _ops._register(handle, [h], (inp,), _gathered(h, inp.dtype))


class HorovodReducescatter(torch.autograd.Function):
    """Reducescatter as an autograd function (gradient: see the module docstring)."""

    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.scale = prescale_factor * postscale_factor / (
            _as_set(process_set).size() if op == Average else 1)
        ctx.process_set = process_set
        return _ops.synchronize(reducescatter_async(tensor, name, op, process_set,
                                                    prescale_factor, postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        grad = _ops.allgather(grad_output.contiguous(), process_set=ctx.process_set)
        return grad * ctx.scale, None, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces ``tensor`` over all ranks and returns this rank's share of the rows (see
    reducescatter_async); the input is not modified. Differentiable."""
    compressed, ctx = compression.compress(tensor)
    out = HorovodReducescatter.apply(compressed, name, op, process_set, prescale_factor,
                                     postscale_factor)
    return compression.decompress(out, ctx)


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """Starts a reducescatter of each tensor as one all-or-nothing group (tensors named
    "<name>.<i>"); synchronize returns the tuple of this rank's shares."""
    set_id = _process_set_id(process_set, "grouped_reducescatter")
    tensors = _ops._as_tensor_list(tensors, "grouped_reducescatter")
    handle, names = _ops._grouped_names("reducescatter", name, len(tensors), set_id)
    for t, n in zip(tensors, names):
        _check_reduce_op(op, "grouped_reducescatter '%s'" % n)
        _ops._check_tensor(t, "grouped_reducescatter '%s'" % n, set_id, names, cuda_ok=True)
    inputs = [_ops._contiguous(t) for t in tensors]
    handles = _ops._submit(_k.grouped_async, "reducescatter", names,
                           [_ops._capsule(i) for i in inputs], [],
                           [_ops._DTYPES[i.dtype] for i in inputs], int(op),
                           float(prescale_factor), float(postscale_factor), set_id,
                           _ops._group_ready_stream(inputs))
    steps = [_gathered(h, i.dtype) for h, i in zip(handles, inputs)]
    return _ops._register(handle, handles, inputs, lambda: tuple(s() for s in steps))


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """reducescatter of each tensor; returns a list of this rank's shares. Differentiable."""
    tensors = _ops._as_tensor_list(tensors, "grouped_reducescatter")
    names = [None] * len(tensors) if name is None else \
        ["%s.%d" % (name, i) for i in range(len(tensors))]
    return [reducescatter(t, n, compression, op, process_set, prescale_factor, postscale_factor)
            for t, n in zip(tensors, names)]


# ---- alltoall -------------------------------------------------------------------------------


def _split_list(splits, what, process_set):
    if splits is None:
        return []
    if isinstance(splits, torch.Tensor):
        splits = splits.tolist()
    splits = [int(s) for s in splits]
    size = _as_set(process_set).size()
    if len(splits) != size:
        raise ValueError("kolo %s: splits has %d entries, expected one per rank of the process "
                         "set (%d)" % (what, len(splits), size))
    return splits


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Starts an alltoall: rank r sends rows [sum(splits[:q]), sum(splits[:q+1])) of ``tensor``
    to rank q (``splits``: one count per rank, summing to the first dimension; None splits
    the first dimension equally) and receives, concatenated in rank order, the rows every rank
    sent it. The other dimensions, the dtype and the device type must match across ranks. A
    CUDA tensor is exchanged through NCCL (grouped ncclSend/ncclRecv) into a new CUDA tensor on
    its device (received_splits stays a CPU tensor).

    Returns:
        A handle; synchronize returns (output, received_splits), received_splits an int32
        tensor of the rows received from each rank.
    """
    set_id = _process_set_id(process_set, "alltoall")
    handle, full_name = _ops._new_handle("alltoall", name, set_id)
    what = "alltoall '%s'" % full_name
    _ops._check_tensor(tensor, what, set_id, cuda_ok=True)
    inp = _ops._contiguous(tensor)
    if set_id != 0 and not _as_set(process_set).included():
        split_list = []  # the runtime refuses a non-member: its message, not one about splits
    else:
        split_list = _split_list(splits, what, process_set)
    h = _ops._submit(_k.alltoall_async, full_name, _ops._capsule(inp), _ops._DTYPES[inp.dtype],
                     split_list, set_id, _ops._ready_stream(inp))
    return _ops._register(handle, [h], (inp,), _gathered(h, inp.dtype, received_splits=True))


class HorovodAlltoall(torch.autograd.Function):
    """Alltoall as an autograd function (gradient: see the module docstring)."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received = _ops.synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.process_set = process_set
        ctx.received = received
        if splits is None:
            return output
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, *unused):
        grad, _ = alltoall(grad_output.contiguous(), splits=ctx.received,
                           process_set=ctx.process_set)
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Scatters the rows of ``tensor`` to the ranks and gathers what they sent (see
    alltoall_async); the input is not modified. Differentiable.

    Returns:
        The gathered tensor; with ``splits`` given, (gathered tensor, received_splits).
    """
    return HorovodAlltoall.apply(tensor, splits, name, process_set)


# ---- barrier --------------------------------------------------------------------------------


def barrier(process_set=global_process_set):
    """Blocks until every rank (of ``process_set``) has called barrier(). It is ordered with the
    operations each rank submitted before it on that set (it does not wait for them to
    complete)."""
    set_id = _process_set_id(process_set, "barrier")
    try:
        _k.barrier(set_id)
    except _k.KoloError as e:
        # a refusal (a rank outside the set) is a ValueError, as in Horovod
        raise _ops._internal_error(e, at_submission=True) from e


# ---- join -----------------------------------------------------------------------------------


def join(device=-1):
    """Horovod's join: this rank has run out of data. Blocks until every rank has called join()
    and returns the rank that joined last (the same on every rank).

    Until then the other ranks' allreduces (and so DistributedOptimizer steps) go on, with each
    joined rank contributing the identity of the reduction: zeros for Sum and Average (Average
    still divides by size(), as Horovod does, so active ranks' gradient averages include the
    joined ranks' zeros), the largest value / +inf for Min, the lowest / -inf for Max, 1 for
    Product. Their barrier() calls include the joined ranks. An allgather, broadcast,
    reducescatter or alltoall that needs a joined rank raises HorovodInternalError on the ranks
    that submitted it ("... rank(s) r joined and cannot take part in ..."). ``device`` is
    Horovod's device for its temporary tensors: for the peers' allreduces of CUDA tensors this
    rank makes its zeros on CUDA device ``device`` (an ordinal or a torch.device); with -1
    (the default) kolo uses the device of this rank's last CUDA operation, or, if it ran none,
    the device the peers' tensors are on."""
    if isinstance(device, torch.device):
        if device.type == "cpu":
            device = -1
        elif device.type == "cuda":
            device = device.index if device.index is not None else torch.cuda.current_device()
        else:
            raise ValueError("kolo: join(device=%r): a CUDA device or -1" % (device,))
    if not isinstance(device, int) or device < -1:
        raise ValueError("kolo: join(device=%r): a CUDA device ordinal, or -1" % (device,))
    try:
        last = _k.join(device)
    except _k.KoloError as e:
        raise _ops._internal_error(e) from e
    _resync_handles()
    return last


def _resync_handles():
    """Unnamed operations are numbered ("allreduce.noname.<n>") by a count of this rank's
    unnamed operations on their process set; ranks that ran different numbers of steps before
    joining would give their next unnamed operations different names and wait for each other
    forever (as in Horovod). join is collective, so every rank moves its counter (of unnamed
    operations on the global set) past the largest one here, and unnamed operations match
    again."""
    with _ops._lock:
        mine = next(_ops._noname_counters.setdefault(0, itertools.count(1)))
    counts = _ops.allgather(torch.tensor([mine], dtype=torch.int64), name="__kolo_join.handles")
    with _ops._lock:
        _ops._noname_counters[0] = itertools.count(int(counts.max()) + 1)
