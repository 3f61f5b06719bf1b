"""Horovod's reducescatter, alltoall, barrier and join over kolo's runtime operations.

Same conventions as mpi_ops (int handles for poll()/synchronize(), names "<op>.<name>" or
"<op>.noname.<n>", HorovodInternalError carrying the runtime's message, ``process_set``: the
ranks that take part; inside a set, rank r is the r-th of its ascending ranks). The autograd
rules:
- reducescatter (and grouped_reducescatter): Horovod's gradient, prescale * postscale *
  allgather(dL/dy) for Average and that times the set's size for Sum. For
  y_r = s * reduce_q(x_q)[rows of r] (s = prescale * postscale, / set size for Average) the
  adjoint is s * allgather(dL/dy): Horovod's gradient is the set's size times it, and kolo keeps
  Horovod's value so that code written for Horovod gets the same gradients;
- alltoall: the gradient of what rank r received from q goes back to q: an alltoall of the
  output gradient with the received splits as the send splits (Horovod's rule).
"""

import itertools

import torch

from kolo import _kolo as _k
from kolo.torch import mpi_ops as _ops
from kolo.torch.compression import Compression
from kolo.torch.mpi_ops import _OP_NAMES, Average, Sum, global_process_set
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


def _check_reduce_op(op, what, set_id, names):
    """Refuses an op other than Average and Sum (reducescatter's). The error is an
    InvalidSubmissionError: a RuntimeError, as Horovod's (whose runtime refuses the op), and a
    ValueError. The refusal is announced to the set's other ranks (``names``: the operation's
    names), so their submissions of these names fail instead of waiting for this rank."""
    if op in (Average, Sum):
        return
    err = _ops.InvalidSubmissionError("kolo %s: op must be Average or Sum, got %s"
                                      % (what, _OP_NAMES.get(op, repr(op))))
    err.code = _ops._INVALID_ARGUMENT
    _ops._announce_refusal(set_id, "reducescatter", names, err)
    raise err


def _grad_scale(op, process_set, prescale_factor, postscale_factor):
    """The factor of reducescatter's gradient (Horovod's; see the module docstring)."""
    scale = prescale_factor * postscale_factor
    return scale * _as_set(process_set).size() if op == Sum else scale


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
    _check_reduce_op(op, what, set_id, [full_name])
    _ops._check_tensor(tensor, "reducescatter", full_name, set_id, cuda_ok=True)
    inp = _ops._contiguous(tensor)
    h = _ops._submit(_k.reducescatter_async, full_name, _ops._capsule(inp),
                     _ops._DTYPES[inp.dtype], int(op), float(prescale_factor),
                     float(postscale_factor), set_id, _ops._ready_stream(inp))
    return _ops._register(handle, [h], (inp,), _gathered(h, inp.dtype))


class HorovodReducescatter(torch.autograd.Function):
    """Reducescatter as an autograd function (gradient: see the module docstring)."""

    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        handle = reducescatter_async(tensor, name, op, process_set, prescale_factor,
                                     postscale_factor)  # first: it checks the arguments
        ctx.scale = _grad_scale(op, process_set, prescale_factor, postscale_factor)
        ctx.process_set = process_set
        return _ops.synchronize(handle)

    @staticmethod
    def backward(ctx, grad_output):
        grad = _ops.allgather(grad_output * ctx.scale, process_set=ctx.process_set)
        return grad, None, None, None, None, None


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
    _check_reduce_op(op, "grouped_reducescatter '%s'" % names[0], set_id, names)
    for t, n in zip(tensors, names):
        _ops._check_tensor(t, "reducescatter", n, set_id, names, cuda_ok=True)
    inputs = [_ops._contiguous(t) for t in tensors]
    handles = _ops._submit(_k.grouped_async, "reducescatter", names,
                           [_ops._capsule(i) for i in inputs], [],
                           [_ops._DTYPES[i.dtype] for i in inputs], int(op),
                           float(prescale_factor), float(postscale_factor), set_id,
                           _ops._group_ready_stream(inputs))
    steps = [_gathered(h, i.dtype) for h, i in zip(handles, inputs)]
    return _ops._register(handle, handles, inputs, lambda: tuple(s() for s in steps))


class HorovodGroupedReducescatter(torch.autograd.Function):
    """Grouped reducescatter as an autograd function (gradient: see the module docstring)."""

    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor, postscale_factor, *tensors):
        handle = grouped_reducescatter_async(list(tensors), name, op, process_set,
                                             prescale_factor, postscale_factor)
        ctx.scale = _grad_scale(op, process_set, prescale_factor, postscale_factor)
        ctx.process_set = process_set
        return _ops.synchronize(handle)

    @staticmethod
    def backward(ctx, *grad_output):
        grads = _ops.grouped_allgather([g * ctx.scale for g in grad_output],
                                       process_set=ctx.process_set)
        return (None, None, None, None, None) + tuple(grads)


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """Reduces each tensor of ``tensors`` over all ranks as one all-or-nothing group (see
    grouped_reducescatter_async) and returns the list of this rank's shares; the inputs are not
    modified. Differentiable."""
    tensors = _ops._as_tensor_list(tensors, "grouped_reducescatter")
    compressed, ctxs = zip(*[compression.compress(t) for t in tensors])
    shares = HorovodGroupedReducescatter.apply(name, op, process_set, prescale_factor,
                                               postscale_factor, *compressed)
    return [compression.decompress(s, c) for s, c in zip(shares, ctxs)]


# ---- alltoall -------------------------------------------------------------------------------


def _split_list(splits, what, process_set, set_id, full_name):
    """``splits`` as a list of ints, one per rank of the set. A refusal (a ValueError, as
    Horovod's) is announced to the set's other ranks, whose alltoall of this name then fails
    with it instead of waiting for this rank."""
    if splits is None:
        return []
    error = None
    if isinstance(splits, torch.Tensor):
        if splits.dtype.is_floating_point or splits.dtype.is_complex or splits.dtype == torch.bool:
            # Horovod refuses a splits tensor that is not int32 with a ValueError
            error = ValueError("kolo %s: splits must hold integers, got a %s tensor"
                               % (what, splits.dtype))
        else:
            splits = splits.tolist()
    if error is None:
        splits = [int(s) for s in splits]
        size = _as_set(process_set).size()
        if len(splits) != size:
            error = ValueError("kolo %s: splits has %d entries, expected one per rank of the "
                               "process set (%d)" % (what, len(splits), size))
    if error is not None:
        _ops._announce_refusal(set_id, "alltoall", [full_name], error)
        raise error
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
    _ops._check_tensor(tensor, "alltoall", full_name, set_id, cuda_ok=True)
    inp = _ops._contiguous(tensor)
    if set_id != 0 and not _as_set(process_set).included():
        split_list = []  # the runtime refuses a non-member: its message, not one about splits
    else:
        split_list = _split_list(splits, what, process_set, set_id, full_name)
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
