"""Names for torch.distributed's collectives, which carry none of their own.

kolo matches operations across ranks by name, and its response cache remembers a name's
negotiated plan, so an operation whose name and parameters were seen before runs without the
full negotiation. torch's backends match by a per-group sequence number instead; a name made of
that number would be new at every call and never hit the cache. A name here is made of what
stays the same from one training step to the next:

    torch.<group>.<collective>.<dtype>[<shape>]<extra>.<k>

- ``group``: the process group's index (0 for the default group, then one per new_group call,
  counted the same on every rank);
- ``collective``, ``dtype``, ``shape`` and ``extra`` (the reduction, the root): the signature;
- ``k``: how many operations of this signature the group issued before, modulo ``PERIOD``, so
  that up to PERIOD operations of one signature (DDP buckets of equal size) can be in flight at
  once and every name recurs: after PERIOD steps each of them is in the cache.

Every rank issues its group's collectives in the same order (torch requires it), so every rank
forms the same names. When they do not (a bucket of another size on one rank, a rank that
skipped a collective), the names differ: ranks that then wait for operations their peers never
submitted are what kolo's deadlock check reports, naming each rank's operation, within seconds.
The per-group sequence number (``seq``) is kept for the error messages.
"""

import itertools

PERIOD = 4

# torch dtype -> short name in operation names.
_DTYPE_NAMES = {
    "torch.float32": "f32", "torch.float64": "f64", "torch.float16": "f16",
    "torch.bfloat16": "bf16", "torch.int64": "i64", "torch.int32": "i32", "torch.int16": "i16",
    "torch.int8": "i8", "torch.uint8": "u8", "torch.uint16": "u16", "torch.bool": "bool",
}


def signature(tensor, any_rows=False):
    """``f32[4x3]``: a tensor's dtype and shape as they appear in names. ``any_rows``: the first
    dimension may differ between ranks (alltoall's input), ``f32[*x3]``."""
    dtype = _DTYPE_NAMES.get(str(tensor.dtype), str(tensor.dtype).replace("torch.", ""))
    dims = [str(d) for d in tensor.shape]
    if any_rows and dims:
        dims[0] = "*"
    return "%s[%s]" % (dtype, "x".join(dims))


class GroupNames(object):
    """The names of one process group's operations, and its sequence of collectives."""

    def __init__(self, group_index):
        self._group = group_index
        self._counts = {}
        self._seq = itertools.count(1)

    def next_seq(self):
        """The next collective's number in this group (1, 2, ...), for messages."""
        return next(self._seq)

    def name(self, collective, sig, extra=""):
        """The name of the next operation of this signature (see the module's text)."""
        key = (collective, sig, extra)
        n = self._counts.get(key, 0)
        self._counts[key] = n + 1
        return "torch.%d.%s.%s%s.%d" % (self._group, collective, sig, extra, n % PERIOD)
