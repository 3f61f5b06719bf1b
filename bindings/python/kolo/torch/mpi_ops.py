"""kolo.torch's collective operations: Horovod's horovod.torch.mpi_ops over kolo._kolo.

Every asynchronous function returns an int handle; ``poll(handle)`` says whether the operation
completed and ``synchronize(handle)`` waits for it and returns its output. Until then the handle
map holds the kolo handles, the tensors they read and write, and the step that produces the
result (the all-gathered tensor, or the copy back into a non-contiguous in-place argument).

Operation names follow Horovod: ``allreduce(t, name="x")`` is negotiated as ``"allreduce.x"``,
an unnamed one as ``"allreduce.noname.<n>"``, n counting this rank's unnamed operations on the
operation's process set (every rank of the set must then issue its unnamed operations in the
same order, as in Horovod; operations on other sets do not shift the count). A grouped operation
of base name ``g`` is submitted as one operation per tensor, ``"allreduce.g.0"``, ...

``process_set`` (every operation): the set of ranks that take part (see process_sets), by
default ``global_process_set``; the operation runs on the set's own path.

Tensors: dense, of the dtypes in ``_DTYPES``, on the CPU or, where kolo was built with CUDA, on
a CUDA device: every operation (allreduce and so DistributedOptimizer, allgather, broadcast,
alltoall, reducescatter, and the grouped ones) runs CUDA tensors through NCCL. kolo waits for
the tensor's device's current stream (an event, no host synchronization; broadcast synchronizes
that stream instead), and the outputs kolo allocates (allgather, alltoall, reducescatter) are
CUDA tensors on the input's device, complete when synchronize() returns. NCCL cannot reduce
int16, uint16 or bool, nor average integers: allreduce and reducescatter of such CUDA tensors
raise HorovodInternalError at submission naming the tensor and dtype. Any other dtype or device
raises ``UnsupportedTensorError`` (both a TypeError and a ValueError) naming the operation.
Non-contiguous tensors are accepted: out-of-place operations read a contiguous copy; in-place
ones work on a contiguous copy and copy the result back into the caller's tensor.
"""

import gc
import sys

import torch
from torch.utils import dlpack as _dlpack

from kolo import _kolo as _k
from kolo.torch.compression import Compression

from kolo.torch.basics import (  # noqa: F401 (re-exported: Horovod's mpi_ops has them)
    _DTYPES, _INVALID_ARGUMENT, _NOT_INITIALIZED, _OP_NAMES, Adasum, Average,
    HorovodInternalError, InvalidSubmissionError, Max, Min, Product, Sum,
    UnsupportedTensorError, _internal_error, _layout, ccl_built,
    cross_rank, cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled,
    is_initialized, local_rank, local_size, mpi_built, mpi_enabled, mpi_threads_supported,
    nccl_built, rank, rocm_built, size, start_timeline, stop_timeline)
from kolo.torch.handles import (  # noqa: F401 (kolo.torch's other modules use them from here)
    _handle_map, _lock, _new_handle, _noname_counters, _orphan, _orphans, _register, poll,
    synchronize)
from kolo.torch.submission import (  # noqa: F401 (kolo.torch's other modules use them from here)
    _announce_refusal, _as_tensor_list, _capsule, _check_disjoint, _check_tensor, _contiguous,
    _finish_in_place,
    _group_ready_stream, _grouped_names, _memory_range, _ready_stream, _register_in_place,
    _resolve_op, _submit, _submit_all)
from kolo.torch import process_sets as _process_sets
from kolo.torch.process_sets import (  # noqa: F401 (re-exported: Horovod's mpi_ops has them)
    ProcessSet, _process_set_id, add_process_set, global_process_set, remove_process_set)

# ---- init, shutdown -------------------------------------------------------------------------

_homogeneous = None


def _is_comm_world(comm):
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None:
        return False
    try:
        return comm is mpi.COMM_WORLD or comm == mpi.COMM_WORLD
    except Exception:  # pragma: no cover - exotic objects
        return False


def _start(comm):
    """kolo._kolo's init for init()'s ``comm``."""
    if comm is None or _is_comm_world(comm):
        _k.init()
        return
    if isinstance(comm, (list, tuple)):
        if not all(isinstance(r, int) and not isinstance(r, bool) for r in comm):
            raise ValueError("kolo: init(comm=...): a list of ranks must hold ints (got %r)"
                             % (comm,))
        _k.init_ranks(list(comm))
        return
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is None or not isinstance(comm, mpi.Comm):
        raise ValueError("kolo: init(comm=...) takes None, a list of MPI_COMM_WORLD ranks or an "
                         "mpi4py communicator (got %r)" % (comm,))
    _k.init_comm(comm.py2f())


def init(comm=None, process_sets=None):
    """Initializes kolo (collective over the ranks it runs on). Starts MPI unless the program
    already has. Calling it again is a no-op, whatever ``comm`` is.

    Arguments:
        comm: where kolo runs, as in Horovod: None (every rank of MPI_COMM_WORLD); a list of
            MPI_COMM_WORLD ranks (only they call init, each with the same list; rank() is the
            position in the list; a rank not listed gets a ValueError naming the list); or an
            mpi4py communicator, which kolo duplicates (every rank of it calls init).
            size(), rank(), local and cross ranks, process sets and every operation are then
            relative to that group.
        process_sets: process sets to register now: a list of hvd.ProcessSet or of rank lists,
            the same on every rank (each gets its process_set_id, as with add_process_set), or
            None / "dynamic" (sets can always be added later with add_process_set).
    """
    global _homogeneous
    was_initialized = _k.is_initialized()
    try:
        _start(comm)
    except _k.KoloError as e:
        # The caller's own mistake (a list that leaves this rank out...) is a ValueError too.
        raise _internal_error(e, at_submission=True) from e
    if was_initialized and _homogeneous is not None:
        _process_sets._init_process_sets(process_sets)
        return
    with _lock:
        _handle_map.clear()
        _noname_counters.clear()
    # Homogeneous: every node runs the same number of ranks. No rank can tell alone, so every
    # rank contributes its node's rank count once, here.
    mine = torch.tensor([_k.local_size()], dtype=torch.int32)
    try:
        h = _k.allgather_async("kolo.torch.init.local_size", _capsule(mine), _k.INT32)
        counts = _dlpack.from_dlpack(h.output())
    except _k.KoloError as e:
        raise _internal_error(e) from e
    _homogeneous = bool((counts == counts[0]).all())
    _process_sets._init_process_sets(process_sets)
    # Pay for the garbage collector's first full walk now rather than in a step. Imports (torch's
    # above all) leave ~100k objects that no full collection has walked yet, so one comes due
    # after a few thousand more objects outlive a young collection: in the first dozens of
    # steps, where it took 35-55 ms of one (bench/submission_cost.py, 1000 all-reduces a step).
    # Walked now, the next is due only after a quarter as many again.
    gc.collect()


def shutdown():
    """Stops kolo on this rank. Operations still pending fail with HorovodInternalError."""
    global _homogeneous
    _k.shutdown()
    with _lock:
        # Pending handles stay: every kolo operation has completed now (failed, if it had not
        # run), so synchronize() raises HorovodInternalError for them, as the docstring says.
        del _orphans[:]
    _homogeneous = None
    _process_sets._reset()


def is_homogeneous():
    """True when every node runs the same number of ranks."""
    if _homogeneous is None or not _k.is_initialized():
        raise ValueError(_NOT_INITIALIZED)
    return _homogeneous


# ---- allreduce ------------------------------------------------------------------------------


def _allreduce_args(name, inp, out, op, prescale_factor, postscale_factor, process_set_id):
    cin = _capsule(inp)
    cout = cin if out is inp else _capsule(out)  # the same capsule object selects in place
    return (_k.allreduce_async,
            (name, cin, cout, _DTYPES[inp.dtype], int(op), float(prescale_factor),
             float(postscale_factor), process_set_id, _ready_stream(inp)))


def allreduce_async(tensor, average=None, name=None, op=None,
                    prescale_factor=1.0, postscale_factor=1.0,
                    process_set=global_process_set):
    """Starts reducing ``tensor`` over all ranks into a new tensor; the input is not modified.

    Arguments:
        tensor: the tensor to reduce (same dtype and shape on every rank).
        average: deprecated, use ``op``.
        name: the operation's name (matched across ranks); generated when None.
        op: Average (the default), Sum, Min, Max, Product or Adasum (floating-point CPU
            tensors, a power-of-two number of ranks).
        prescale_factor, postscale_factor: factors applied before and after the reduction.
        process_set: the ranks that take part (default: all); Average divides by its size.

    Returns:
        A handle for poll() and synchronize().
    """
    op = _resolve_op(op, average)
    set_id = _process_set_id(process_set, "allreduce")
    handle, full_name = _new_handle("allreduce", name, set_id)
    _check_tensor(tensor, "allreduce", full_name, set_id, cuda_ok=True)
    inp = _contiguous(tensor)
    out = torch.empty_like(inp, memory_format=torch.contiguous_format)
    fn, args = _allreduce_args(full_name, inp, out, op, prescale_factor, postscale_factor,
                               set_id)
    h = _submit(fn, *args)
    return _register(handle, h, inp, out)


def allreduce_async_(tensor, average=None, name=None, op=None,
                     prescale_factor=1.0, postscale_factor=1.0,
                     process_set=global_process_set):
    """Starts reducing ``tensor`` in place over all ranks. Arguments as allreduce_async.

    Returns:
        A handle for poll() and synchronize(); synchronize() returns ``tensor``.
    """
    op = _resolve_op(op, average)
    set_id = _process_set_id(process_set, "allreduce")
    handle, full_name = _new_handle("allreduce", name, set_id)
    _check_tensor(tensor, "allreduce", full_name, set_id, cuda_ok=True)
    buf = _contiguous(tensor)
    fn, args = _allreduce_args(full_name, buf, buf, op, prescale_factor, postscale_factor, set_id)
    h = _submit(fn, *args)
    return _register_in_place(handle, h, tensor, buf)


def allreduce_(tensor, average=None, name=None, op=None,
               prescale_factor=1.0, postscale_factor=1.0,
               process_set=global_process_set):
    """Reduces ``tensor`` in place over all ranks and returns it. Arguments as
    allreduce_async."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


class HorovodAllreduce(torch.autograd.Function):
    """Allreduce as an autograd function: the gradient is the allreduce of the output's
    gradient with the same op and scale factors (as in Horovod)."""

    @staticmethod
    def forward(ctx, tensor, average, name, op, prescale_factor, postscale_factor, process_set):
        ctx.op = _resolve_op(op, average)
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        return synchronize(allreduce_async(tensor, None, name, ctx.op, prescale_factor,
                                           postscale_factor, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=ctx.op, prescale_factor=ctx.prescale_factor,
                         postscale_factor=ctx.postscale_factor, process_set=ctx.process_set)
        return grad, None, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Reduces ``tensor`` over all ranks and returns the result in a new tensor; the input is
    not modified. Differentiable. ``compression`` (Compression.none or Compression.fp16)
    chooses the tensor that crosses the wire. Other arguments as allreduce_async."""
    op = _resolve_op(op, average)
    compressed, ctx = compression.compress(tensor)
    reduced = HorovodAllreduce.apply(compressed, None, name, op, prescale_factor,
                                     postscale_factor, process_set)
    return compression.decompress(reduced, ctx)


# ---- grouped allreduce ----------------------------------------------------------------------


def _grouped_allreduce_async(tensors, in_place, op, name, prescale_factor, postscale_factor,
                             process_set):
    set_id = _process_set_id(process_set, "grouped_allreduce")
    tensors = _as_tensor_list(tensors, "grouped_allreduce")
    handle, names = _grouped_names("allreduce", name, len(tensors), set_id)
    for t, n in zip(tensors, names):
        _check_tensor(t, "allreduce", n, set_id, names, cuda_ok=True)
    if in_place:
        _check_disjoint(tensors, "grouped_allreduce_")
    inputs = [_contiguous(t) for t in tensors]
    if in_place:
        outputs = inputs
    else:
        outputs = [torch.empty_like(t, memory_format=torch.contiguous_format) for t in inputs]
    keep = (tensors, inputs, outputs)
    cins = [_capsule(i) for i in inputs]
    couts = cins if in_place else [_capsule(o) for o in outputs]
    # One submission for the group: negotiated and executed all-or-nothing by the runtime.
    handles = _submit(_k.grouped_async, "allreduce", names, cins, couts,
                      [_DTYPES[i.dtype] for i in inputs], int(op), float(prescale_factor),
                      float(postscale_factor), set_id, _group_ready_stream(inputs))
    if in_place:
        steps = [_finish_in_place(t, b) for t, b in zip(tensors, inputs)]
        finish = lambda: tuple(step() for step in steps)  # noqa: E731
    else:
        finish = lambda: tuple(outputs)  # noqa: E731
    return _register(handle, handles, keep, finish)


def grouped_allreduce_async(tensors, average=None, name=None, op=None,
                            prescale_factor=1.0, postscale_factor=1.0,
                            process_set=global_process_set):
    """Starts reducing each tensor of ``tensors`` over all ranks into new tensors, as one group
    (tensors named ``<name>.0``, ``<name>.1``, ...): negotiated and executed all-or-nothing, so
    if one tensor fails on any rank (a mismatch, a refusal) every one fails. Arguments as
    allreduce_async. synchronize() returns a tuple of tensors."""
    op = _resolve_op(op, average)
    return _grouped_allreduce_async(tensors, False, op, name, prescale_factor,
                                    postscale_factor, process_set)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None,
                             prescale_factor=1.0, postscale_factor=1.0,
                             process_set=global_process_set):
    """As grouped_allreduce_async, in place."""
    op = _resolve_op(op, average)
    return _grouped_allreduce_async(tensors, True, op, name, prescale_factor,
                                    postscale_factor, process_set)


def grouped_allreduce_(tensors, average=None, name=None, op=None,
                       prescale_factor=1.0, postscale_factor=1.0,
                       process_set=global_process_set):
    """Reduces each tensor of ``tensors`` in place over all ranks; returns them."""
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


class HorovodGroupedAllreduce(torch.autograd.Function):
    """Grouped allreduce as an autograd function."""

    @staticmethod
    def forward(ctx, average, name, op, prescale_factor, postscale_factor, process_set,
                *tensors):
        ctx.op = _resolve_op(op, average)
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        return synchronize(grouped_allreduce_async(list(tensors), None, name, ctx.op,
                                                   prescale_factor, postscale_factor,
                                                   process_set))

    @staticmethod
    def backward(ctx, *grad_output):
        grads = grouped_allreduce(list(grad_output), op=ctx.op,
                                  prescale_factor=ctx.prescale_factor,
                                  postscale_factor=ctx.postscale_factor,
                                  process_set=ctx.process_set)
        return (None, None, None, None, None, None) + tuple(grads)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """Reduces each tensor of ``tensors`` over all ranks; returns a list of new tensors.
    Differentiable. Arguments as allreduce."""
    op = _resolve_op(op, average)
    tensors = _as_tensor_list(tensors, "grouped_allreduce")
    compressed, ctxs = zip(*[compression.compress(t) for t in tensors])
    reduced = HorovodGroupedAllreduce.apply(None, name, op, prescale_factor, postscale_factor,
                                            process_set, *compressed)
    return [compression.decompress(t, c) for t, c in zip(reduced, ctxs)]


# ---- sparse allreduce (allgather of indices and values) -------------------------------------


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Starts reducing a sparse COO tensor by all-gathering its indices and values. Returns a
    callable that waits and returns the reduced sparse tensor (as Horovod does)."""
    _process_set_id(process_set, "sparse_allreduce")
    t = tensor.coalesce()
    indices_handle = allgather_async(t.indices().transpose(0, 1).contiguous(),
                                     name=None if name is None else "%s.indices" % name,
                                     process_set=process_set)
    values_handle = allgather_async(t.values(),
                                    name=None if name is None else "%s.values" % name,
                                    process_set=process_set)

    def handle():
        values = synchronize(values_handle)
        indices = synchronize(indices_handle)
        if op == Average:
            values = values / _process_sets._as_set(process_set).size()
        if indices.dim() == 0 or values.dim() == 0:
            return t.new().resize_as_(t)
        return torch.sparse_coo_tensor(indices.transpose(0, 1), values, t.size(),
                                       dtype=t.dtype, device=t.device, **_SPARSE_CHECK)

    return handle


def _sparse_check_argument():
    """``check_invariants=True`` where torch.sparse_coo_tensor takes it (torch >= 2.0): the
    indices come from other ranks, so a rank whose tensor is smaller than a peer's gets an
    error instead of a tensor with out-of-range indices, and torch does not warn that the
    checks are implicitly disabled (which fails under ``-W error``). Nothing on older torch."""
    try:
        torch.sparse_coo_tensor(torch.zeros(1, 0, dtype=torch.int64), torch.zeros(0), (1,),
                                check_invariants=True)
    except TypeError:
        return {}
    return {"check_invariants": True}


_SPARSE_CHECK = _sparse_check_argument()


# ---- allgather ------------------------------------------------------------------------------


def _allgather_result(h, dtype):
    def finish():
        out = _dlpack.from_dlpack(h.output())
        if dtype == torch.bool:
            out = out.view(torch.bool)
        return out
    return finish


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts concatenating ``tensor`` from every rank along the first dimension (which may
    differ per rank; the other dimensions, the dtype and the device type must match). A CUDA
    tensor is gathered through NCCL (ncclAllGather, or one ncclBroadcast per rank when the first
    dimensions differ) into a new CUDA tensor on its device.

    Returns:
        A handle for poll() and synchronize().
    """
    set_id = _process_set_id(process_set, "allgather")
    handle, full_name = _new_handle("allgather", name, set_id)
    _check_tensor(tensor, "allgather", full_name, set_id, cuda_ok=True)
    inp = _contiguous(tensor)
    h = _submit(_k.allgather_async, full_name, _capsule(inp), _DTYPES[inp.dtype], set_id,
                _ready_stream(inp))
    return _register(handle, [h], (inp,), _allgather_result(h, inp.dtype))


def _allgather_backward(grads, dims, process_set):
    """Horovod's allgather gradient: average the output gradients over the ranks (of the
    process set), then take this rank's rows. ``dims``: this rank's first dimension of each
    tensor."""
    reduced = grouped_allreduce(list(grads), op=Average, process_set=process_set)
    # every rank's first dimensions, one row per rank of the set
    all_dims = allgather(torch.tensor([dims], dtype=torch.int64), process_set=process_set)
    me = _process_sets._as_set(process_set).rank()
    offsets = all_dims[:me].sum(dim=0) if me > 0 else torch.zeros(len(dims), dtype=torch.int64)
    return [g.narrow(0, int(offsets[i]), dims[i]) for i, g in enumerate(reduced)]


class HorovodAllgather(torch.autograd.Function):
    """Allgather as an autograd function: the gradient is the average over ranks of the
    output's gradient, narrowed to this rank's rows (as in Horovod)."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.dim = tensor.shape[0] if tensor.dim() > 0 else 0
        ctx.process_set = process_set
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        (grad,) = _allgather_backward([grad_output], [ctx.dim], ctx.process_set)
        return grad, None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates ``tensor`` from every rank along the first dimension and returns the result
    (the input is not modified). Differentiable."""
    return HorovodAllgather.apply(tensor, name, process_set)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """Starts an allgather of each tensor of ``tensors`` as one all-or-nothing group (tensors
    named ``<name>.0``, ...). synchronize() returns a tuple of tensors."""
    set_id = _process_set_id(process_set, "grouped_allgather")
    tensors = _as_tensor_list(tensors, "grouped_allgather")
    handle, names = _grouped_names("allgather", name, len(tensors), set_id)
    for t, n in zip(tensors, names):
        _check_tensor(t, "allgather", n, set_id, names, cuda_ok=True)
    inputs = [_contiguous(t) for t in tensors]
    handles = _submit(_k.grouped_async, "allgather", names, [_capsule(i) for i in inputs], [],
                      [_DTYPES[i.dtype] for i in inputs], 0, 1.0, 1.0, set_id,
                      _group_ready_stream(inputs))
    steps = [_allgather_result(h, i.dtype) for h, i in zip(handles, inputs)]
    return _register(handle, handles, inputs, lambda: tuple(step() for step in steps))


class HorovodGroupedAllgather(torch.autograd.Function):
    """Grouped allgather as an autograd function."""

    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.dims = [t.shape[0] if t.dim() > 0 else 0 for t in tensors]
        ctx.process_set = process_set
        return synchronize(grouped_allgather_async(list(tensors), name, process_set))

    @staticmethod
    def backward(ctx, *grad_output):
        grads = _allgather_backward(grad_output, ctx.dims, ctx.process_set)
        return (None, None) + tuple(grads)


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Allgathers each tensor of ``tensors``; returns a list of tensors. Differentiable."""
    tensors = _as_tensor_list(tensors, "grouped_allgather")
    return list(HorovodGroupedAllgather.apply(name, process_set, *tensors))


# ---- broadcast ------------------------------------------------------------------------------


def _broadcast_args(name, inp, out, root_rank, process_set_id):
    if inp.device.type == "cuda":
        # Broadcast has no ready-stream entry point: the tensor's writes must be done before
        # kolo's stream reads it (broadcasts are rare: parameters at start, objects).
        torch.cuda.current_stream(inp.device).synchronize()
    cin = _capsule(inp)
    cout = cin if out is inp else _capsule(out)
    return (_k.broadcast_async, (name, cin, cout, _DTYPES[inp.dtype], int(root_rank),
                                 process_set_id))


def _submit_broadcast(name, inp, out, root_rank, process_set, process_set_id):
    """Submits a broadcast. On a process set, ``root_rank`` is a global rank, as in Horovod:
    kolo gets its index in the set. A root outside the set is passed on as an index kolo
    refuses, so the set's other ranks fail with this one instead of waiting for it."""
    def submit(root_in_set):
        fn, args = _broadcast_args(name, inp, out, root_in_set, process_set_id)
        return _submit(fn, *args)

    root = int(root_rank)
    if process_set_id == 0:
        return submit(root)
    ranks = process_set.ranks
    if root in ranks:
        return submit(ranks.index(root))
    try:
        return submit(len(ranks))
    except InvalidSubmissionError as e:
        if not process_set.included():
            raise  # the runtime's "not a member" says more
        err = InvalidSubmissionError(
            "broadcast '%s': root rank %d is not in process set %d %s (root_rank is a global "
            "rank, as in Horovod)" % (name, root, process_set_id, ranks))
        err.code = e.code
        raise err from e


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts broadcasting ``root_rank``'s ``tensor`` into a new tensor on every rank; the
    input is not modified.

    Returns:
        A handle for poll() and synchronize().
    """
    set_id = _process_set_id(process_set, "broadcast")
    handle, full_name = _new_handle("broadcast", name, set_id)
    _check_tensor(tensor, "broadcast", full_name, set_id, cuda_ok=True)
    inp = _contiguous(tensor)
    out = torch.empty_like(inp, memory_format=torch.contiguous_format)
    h = _submit_broadcast(full_name, inp, out, root_rank, process_set, set_id)
    return _register(handle, h, inp, out)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts broadcasting ``root_rank``'s ``tensor`` into ``tensor`` on every rank (in place).

    Returns:
        A handle for poll() and synchronize(); synchronize() returns ``tensor``.
    """
    set_id = _process_set_id(process_set, "broadcast")
    handle, full_name = _new_handle("broadcast", name, set_id)
    _check_tensor(tensor, "broadcast", full_name, set_id, cuda_ok=True)
    buf = _contiguous(tensor)
    h = _submit_broadcast(full_name, buf, buf, root_rank, process_set, set_id)
    return _register_in_place(handle, h, tensor, buf)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Broadcasts ``root_rank``'s ``tensor`` into ``tensor`` on every rank; returns it."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


class HorovodBroadcast(torch.autograd.Function):
    """Broadcast as an autograd function: the gradient is the average over ranks of the
    output's gradient on the root rank, and zero elsewhere (as in Horovod)."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        if rank() != ctx.root_rank:
            grad = torch.zeros_like(grad)
        return grad, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns ``root_rank``'s ``tensor`` on every rank, in a new tensor (the input is not
    modified). Differentiable."""
    return HorovodBroadcast.apply(tensor, root_rank, name, process_set)
