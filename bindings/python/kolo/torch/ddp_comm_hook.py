"""DDP communication hooks that all-reduce DDP's gradient buckets through kolo's runtime, whatever
process group DDP itself runs on (gloo, NCCL, or kolo's backend):

    import kolo.torch as hvd
    from kolo.torch import ddp_comm_hook
    hvd.init()
    ddp = DistributedDataParallel(model, process_group=group)
    ddp.register_comm_hook(None, ddp_comm_hook.allreduce_hook)
    # or ddp_comm_hook.fp16_compress_hook / ddp_comm_hook.bf16_compress_hook

The state argument is the kolo process set to average over (a ``kolo.torch.ProcessSet``), or
None for every rank of kolo's job; it must hold the same ranks as DDP's group. Each bucket is
averaged in place (Average, as DDP's own hook); the compress hooks average a float16 or bfloat16
copy and write it back, halving the bytes sent, like torch's ``fp16_compress_hook``.

Names: ``ddp.<bucket index>.<elements>``, the same every step, so the buckets are agreed through
kolo's response cache (DDP rebuilds its buckets after the first step; the element count keeps a
rebuilt bucket from taking an old bucket's name). Errors (a mismatch between ranks, a lost rank)
fail the Future DDP waits on, so backward() raises them, as the backend does (work.py).
"""

import torch

from kolo import _kolo as _k
from kolo.torch.basics import _DTYPES, Average
from kolo.torch.distributed.work import Completer, KoloWork
from kolo.torch.process_sets import _process_set_id
from kolo.torch.submission import _capsule, _ready_stream

_completer = None


def _submit(state, bucket, buf, finish):
    global _completer
    if _completer is None:
        _completer = Completer("kolo-ddp-hook")
    set_id = _process_set_id(state, "ddp_comm_hook")
    name = "ddp.%d.%d" % (bucket.index(), buf.numel())
    cap = _capsule(buf)
    try:
        h = _k.allreduce_async(name, cap, cap, _DTYPES[buf.dtype], int(Average), 1.0, 1.0,
                               set_id, _ready_stream(buf))
    except _k.KoloError as e:
        raise RuntimeError("kolo ddp_comm_hook: bucket %d refused: %s" % (bucket.index(), e)) from e
    work = KoloWork("DDP bucket %d (%s)" % (bucket.index(), name), [h], [buf], finish)
    _completer.add(work)
    return work.get_future()


def allreduce_hook(state, bucket):
    """Averages the bucket in place through kolo (DDP's default, over kolo's runtime)."""
    buf = bucket.buffer()
    return _submit(state, bucket, buf, lambda: buf)


def _compress_hook(dtype):
    def hook(state, bucket):
        buf = bucket.buffer()
        low = buf.to(dtype)

        def finish():
            buf.copy_(low)
            return buf
        return _submit(state, bucket, low, finish)
    # Not torch's names: DDP's register_comm_hook recognises "bf16_compress_hook" by name and
    # then demands CUDA and NCCL, which these hooks do not need.
    hook.__name__ = "kolo_%s_compress_hook" % ("fp16" if dtype == torch.float16 else "bf16")
    hook.__doc__ = ("Averages a %s copy of the bucket through kolo and writes it back (half the "
                    "bytes of allreduce_hook)." % dtype)
    return hook


fp16_compress_hook = _compress_hook(torch.float16)
bf16_compress_hook = _compress_hook(torch.bfloat16)
