"""What every kolo.torch submission does before it reaches kolo._kolo: refuse tensors kolo
cannot take (and tell the peers, so they do not wait), hand contiguous tensors over as DLPack
capsules, name the stream kolo waits for, resolve Horovod's ``op``/``average`` arguments, and
keep what was submitted alive when a later submission of the same call is refused."""

import warnings

import torch
from torch.utils import dlpack as _dlpack

from kolo import _kolo as _k
from kolo.torch.basics import (_DTYPES, Average, Sum, UnsupportedTensorError,
                               _internal_error)
from kolo.torch.handles import _new_handle, _orphan, _register

_BUILT_WITH_CUDA = _k.built_with_cuda()


def _check_tensor(tensor, op, name, set_id=None, names=None, cuda_ok=False):
    """Refuses tensors kolo cannot take, for operation ``op`` ("allreduce", ...) of ``name``.
    With ``set_id``, a refusal is announced to the other ranks (kolo_refuse_on), so their
    submissions of the same name (``names``: every member of a group, whose message then says
    "grouped_<op>") fail with this reason instead of waiting for this rank. ``cuda_ok``: the
    operation has a device path (every collective has), so CUDA tensors pass where kolo was
    built with CUDA."""
    try:
        _check_tensor_locally(tensor, op, name, names is not None, cuda_ok)
    except (TypeError, UnsupportedTensorError) as e:
        if set_id is not None:
            _announce_refusal(set_id, op, names if names is not None else [name], e)
        raise


def _announce_refusal(set_id, op, names, error):
    """Tells the other ranks of process set ``set_id`` that this rank refused operation ``op``
    ("allreduce", ...) of ``names`` (kolo_refuse_on): their submissions of these names fail
    with this reason instead of waiting for this rank. For refusals made here in Python, before
    kolo._kolo sees the submission (kolo's own refusals are announced by kolo)."""
    for n in names:
        try:
            _k.refuse(set_id, op, n, str(error))
        except _k.KoloError:
            pass  # not initialised, or not a member: nobody waits for this rank


def _check_tensor_locally(tensor, op, name, grouped, cuda_ok):
    # The common case first, in as few attribute reads as possible: this runs on every
    # submission. is_cpu and is_cuda are flags on the tensor; tensor.device builds a
    # torch.device object on every read (a quarter of a microsecond).
    if (isinstance(tensor, torch.Tensor) and tensor.layout == torch.strided
            and tensor.dtype in _DTYPES
            and (tensor.is_cpu or (tensor.is_cuda and cuda_ok and _BUILT_WITH_CUDA))):
        return
    what = "%s%s '%s'" % ("grouped_" if grouped else "", op, name)
    if not isinstance(tensor, torch.Tensor):
        raise TypeError("kolo %s: expected a torch.Tensor, got %s"
                        % (what, type(tensor).__name__))
    if tensor.layout != torch.strided:
        raise UnsupportedTensorError(
            "kolo %s: %s tensors are not supported, only dense (strided) ones"
            % (what, tensor.layout))
    if tensor.dtype not in _DTYPES:
        raise UnsupportedTensorError(
            "kolo %s: tensor dtype %s is not supported (supported: %s)"
            % (what, tensor.dtype,
               ", ".join(str(d).replace("torch.", "") for d in _DTYPES)))
    # A tensor subclass may report a device of its own (__torch_function__) that the flags
    # above do not see: judge by what it reports, as the messages do.
    device = tensor.device.type
    if device == "cpu" or (device == "cuda" and cuda_ok and _BUILT_WITH_CUDA):
        return
    raise UnsupportedTensorError(
        "kolo %s: the tensor is on %s; kolo.torch supports CPU tensors%s"
        % (what, tensor.device,
           " and CUDA tensors" if _BUILT_WITH_CUDA else " only (kolo was built without CUDA)"))


def _capsule(tensor):
    """A DLPack capsule of a contiguous CPU or CUDA tensor (bool exported as uint8: torch 1.13
    has no DLPack bool). A tensor that requires grad is exported detached: DLPack carries no
    autograd state, and torch's own ``Tensor.__dlpack__`` refuses such a tensor. Others are
    exported as they are: detach makes a tensor, which costs more than the export itself
    (0.7 against 0.45 us)."""
    t = tensor.detach() if tensor.requires_grad else tensor
    if t.dtype == torch.bool:
        t = t.view(torch.uint8)
    return _dlpack.to_dlpack(t)


def _contiguous(tensor):
    return tensor if tensor.is_contiguous() else tensor.contiguous()


def _register_in_place(handle, kolo_handle, tensor, buf):
    """Enters an in-place operation that worked on ``buf`` (``tensor`` itself when contiguous,
    then as one tracked object: see handles._Pending) in the handle map."""
    if buf is tensor:
        return _register(handle, kolo_handle, None, tensor)
    return _register(handle, [kolo_handle], (tensor, buf), _finish_in_place(tensor, buf))


def _finish_in_place(tensor, buf):
    """The result step of an in-place operation that worked on ``buf``."""
    if buf is tensor:
        return lambda: tensor

    def copy_back():
        with torch.no_grad():
            tensor.copy_(buf)
        return tensor
    return copy_back


def _submit(fn, *args):
    try:
        return fn(*args)
    except _k.KoloError as e:
        raise _internal_error(e, at_submission=True) from e


def _submit_all(submissions, keep):
    """Submits several operations; if one is refused, the ones already submitted are kept
    alive (see _orphan) and the error is raised."""
    handles = []
    try:
        for fn, args in submissions:
            handles.append(_submit(fn, *args))
    except BaseException:
        _orphan(handles, keep)
        raise
    return handles


# ---- op / average ---------------------------------------------------------------------------


def _resolve_op(op, average):
    """Horovod's rule for the deprecated ``average`` argument."""
    if op is not None:
        if average is not None:
            raise ValueError("The op parameter supersedes average. Please provide only one of "
                             "them.")
        return op
    if average is not None:
        warnings.warn("Parameter `average` has been replaced with `op` and will be removed",
                      DeprecationWarning)
        return Average if average else Sum
    return Average


def _ready_stream(tensor):
    """The stream whose queued kernels write a CUDA ``tensor`` (the current stream of its
    device, as a cudaStream_t integer): kolo waits for it before reading. 0 on torch's default
    stream, which kolo takes as CUDA's legacy default stream (it still waits for it); 0 for CPU
    tensors, for which it means nothing."""
    if not tensor.is_cuda:
        return 0
    return int(torch.cuda.current_stream(tensor.device).cuda_stream)


def _group_ready_stream(inputs):
    """The ready stream of a group (one for all its tensors: the current stream of the first
    CUDA tensor's device; 0 when none is on CUDA)."""
    for t in inputs:
        if t.is_cuda:
            return _ready_stream(t)
    return 0


def _grouped_names(prefix, name, count, process_set_id=0):
    handle, base = _new_handle(prefix, name, process_set_id)
    return handle, ["%s.%d" % (base, i) for i in range(count)]


def _as_tensor_list(tensors, what):
    if isinstance(tensors, torch.Tensor):
        raise TypeError("kolo %s: expected a list of tensors, got a single tensor" % what)
    tensors = list(tensors)
    if not tensors:
        raise ValueError("kolo %s: needs at least one tensor" % what)
    return tensors


def _memory_range(t):
    """[first byte, last byte + 1) of the elements of ``t`` in its storage."""
    extent = 1 + sum((d - 1) * s for d, s in zip(t.shape, t.stride()) if d > 0)
    start = t.data_ptr()
    return start, start + (extent if t.numel() else 0) * t.element_size()


def _check_disjoint(tensors, what):
    """In-place grouped operations reduce each tensor separately: a tensor listed twice, or
    views that share elements, would be reduced twice (or not, depending on fusion)."""
    ranges = sorted((_memory_range(t), i) for i, t in enumerate(tensors) if t.numel())
    for ((_, end), i), ((start, _), j) in zip(ranges, ranges[1:]):
        if start < end:
            raise ValueError("kolo %s: tensors %d and %d share memory; an in-place grouped "
                             "operation needs disjoint tensors" % (what, min(i, j), max(i, j)))
