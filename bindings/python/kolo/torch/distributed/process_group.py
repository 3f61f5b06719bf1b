"""ProcessGroupKolo: torch.distributed's ProcessGroup over kolo's runtime.

A Python subclass of torch's ProcessGroup (torch calls Python overrides through its pybind11
trampoline, on 1.13 and on 2.x alike), so one build of kolo serves every torch version. Each
collective is submitted to kolo's background thread like any kolo.torch operation, under a name
from names.py, and returns a KoloWork (work.py) that the group's completer thread completes.

What maps onto what (torch's argument -> kolo's operation):
- allreduce, allreduce_coalesced: kolo's allreduce (coalesced: a grouped allreduce, fused),
  in place. SUM, AVG, MIN, MAX, PRODUCT; PREMUL_SUM and the bitwise ops are refused (torch
  gives a Python backend no way to read PREMUL_SUM's factor).
- broadcast: kolo's broadcast, in place; the root is a rank of the group.
- allgather, _allgather_base (all_gather_into_tensor), gather: kolo's allgather of the flattened
  input, copied into the outputs (gather: on the root only).
- reduce_scatter, _reduce_scatter_base (reduce_scatter_tensor): kolo's reducescatter of the
  flattened inputs for SUM and AVG; MIN, MAX and PRODUCT, which kolo's reducescatter lacks, as an
  allreduce of which each rank keeps its part.
- alltoall_base, alltoall: kolo's alltoall (rows of the first dimension per rank).
- reduce: an allreduce of a copy; the root keeps the result. scatter: a broadcast of the root's
  inputs; each rank keeps its part.
- barrier: waits for this group's pending collectives, then kolo's barrier.
- send, recv: refused. kolo negotiates collectives; a point-to-point message has no collective
  to match. A gloo group beside the kolo one (``dist.new_group(backend="gloo")``) carries them.

One tensor per process and collective (torch's multi-device lists are gone from torch 2.x).
CPU tensors, and CUDA tensors where kolo was built with CUDA and NCCL (kolo waits for the
tensor's current stream, as kolo.torch does).
"""

import torch
import torch.distributed as dist

from kolo import _kolo as _k
from kolo.torch import mpi_ops as _ops
from kolo.torch.basics import _DTYPES, Average, Max, Min, Product, Sum
from kolo.torch.distributed.names import GroupNames, signature
from kolo.torch.distributed.work import Completer, KoloWork, backend_error, completed_work
from kolo.torch.submission import _capsule, _check_tensor, _contiguous, _ready_stream

_RED = dist.ReduceOp.RedOpType
# torch's reduction -> (kolo's op, its name in operation names).
_REDUCE_OPS = {
    _RED.SUM: (Sum, "sum"),
    _RED.AVG: (Average, "avg"),
    _RED.MIN: (Min, "min"),
    _RED.MAX: (Max, "max"),
    _RED.PRODUCT: (Product, "prod"),
}


def _ranks_text(ranks):
    if ranks == list(range(ranks[0], ranks[0] + len(ranks))) and len(ranks) > 2:
        return "%d-%d" % (ranks[0], ranks[-1])
    return ",".join(str(r) for r in ranks)


class ProcessGroupKolo(dist.ProcessGroup):
    """torch.distributed's process group "kolo" over one kolo process set.

    ``process_set_id``: the kolo set (0: every rank); ``ranks``: its global ranks, ascending
    (torch's group rank r is ranks[r]); ``group_index``: the group's number in names."""

    def __init__(self, rank, size, process_set_id, ranks, group_index):
        super().__init__(rank, size)
        self._set = process_set_id
        self._ranks = list(ranks)
        self._names = GroupNames(group_index)
        self._desc = "group %d (ranks %s)" % (group_index, _ranks_text(self._ranks))
        self._in_flight = {}  # name -> the Work that last used it
        self._pending = []    # Works not yet seen complete, for barrier
        self._completer = Completer("kolo-pg-%d" % group_index)

    # ---- torch's ProcessGroup interface: identity -------------------------------------------

    def getBackendName(self):
        return "kolo"

    def name(self):
        return "kolo"

    # torch >= 2 names each group after making it (setGroupName); ProcessGroup keeps the name
    # in its C++ backends, which a Python group has none of, so the group keeps it here
    # (DeviceMesh, and so FSDP2, look groups up by name).
    def setGroupName(self, name):
        self._group_name = name

    def getGroupName(self):
        return getattr(self, "_group_name", "")

    def setGroupDesc(self, desc):
        self._group_desc = desc

    def getGroupDesc(self):
        return getattr(self, "_group_desc", "")

    def __repr__(self):
        return "ProcessGroupKolo(%s, rank %d)" % (self._desc, self.rank())

    # ---- collectives --------------------------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        t = self._single(tensors, "allreduce")
        op, op_name = self._reduce_op(opts, "allreduce")
        name = self._names.name("allreduce", signature(t), "." + op_name)
        held = []

        def submit():
            held.append(self._allreduce_args(name, t, op))
            return held
        return self._issue("allreduce", [name], [t], submit,
                           lambda: self._copy_back([t], [held[0][1]])())

    def allreduce_coalesced(self, tensors, opts=None):
        tensors = list(tensors)
        if not tensors:
            return completed_work("allreduce_coalesced of no tensors", [])
        op, op_name = self._reduce_op(opts, "allreduce_coalesced")
        names = [self._names.name("allreduce", signature(t), "." + op_name) for t in tensors]

        def submissions():
            bufs = [_contiguous(t) for t in tensors]
            for n, t in zip(names, tensors):
                _check_tensor(t, "allreduce", n, self._set, cuda_ok=True)
            caps = [_capsule(b) for b in bufs]
            handles = _k.grouped_async("allreduce", names, caps, caps,
                                       [_DTYPES[b.dtype] for b in bufs], int(op), 1.0, 1.0,
                                       self._set, _ready_stream(bufs[0]))
            return [(h, bufs) for h in handles], self._copy_back(tensors, bufs)
        return self._issue_many("allreduce_coalesced", names, tensors, submissions)

    def broadcast(self, tensors, opts=None):
        t = self._single(tensors, "broadcast")
        root = self._root(opts, "broadcast")
        name = self._names.name("broadcast", signature(t), ".root%d" % root)

        def submit():
            _check_tensor(t, "broadcast", name, self._set, cuda_ok=True)
            buf = _contiguous(t)
            fn, args = _ops._broadcast_args(name, buf, buf, root, self._set)
            held.append((fn(*args), buf))
            return held
        held = []
        return self._issue("broadcast", [name], [t], submit,
                           lambda: self._copy_back([t], [held[0][1]])())

    def allgather(self, output_tensors, input_tensors, opts=None):
        inp = self._single(input_tensors, "allgather")
        outs = self._single_list(output_tensors, "allgather")
        self._check_count(outs, "allgather", "output tensors")
        name = self._names.name("allgather", signature(inp))
        n = inp.numel()
        self._check_numels(outs, n, "allgather", "output")

        def finish(gathered):
            for i, o in enumerate(outs):
                o.copy_(gathered[i * n:(i + 1) * n].view(o.shape))
            return [outs]
        return self._gather(name, inp, finish)

    def _allgather_base(self, output, input, opts=None):  # noqa: A002 - torch's name
        name = self._names.name("allgather", signature(input))
        if output.numel() != input.numel() * self.size():
            raise ValueError("kolo all_gather_into_tensor: the output has %d elements, the "
                             "input %d x group size %d = %d" % (output.numel(), input.numel(),
                                                               self.size(),
                                                               input.numel() * self.size()))

        def finish(gathered):
            output.copy_(gathered.view(output.shape))
            return [output]
        return self._gather(name, input, finish)

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        works = [self._allgather_base(o, i) for o, i in zip(outputs, inputs)]
        return works[-1] if works else completed_work("allgather of no tensors", [])

    def gather(self, output_tensors, input_tensors, opts=None):
        inp = self._single(input_tensors, "gather")
        root = self._root(opts, "gather")
        outs = output_tensors[0] if self.rank() == root and output_tensors else []
        if self.rank() == root:
            self._check_count(outs, "gather", "output tensors on the root")
            self._check_numels(outs, inp.numel(), "gather", "output")
        name = self._names.name("gather", signature(inp), ".root%d" % root)
        n = inp.numel()

        def finish(gathered):
            for i, o in enumerate(outs):
                o.copy_(gathered[i * n:(i + 1) * n].view(o.shape))
            return [outs] if outs else []
        return self._gather(name, inp, finish)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        out = self._single(output_tensors, "reduce_scatter")
        ins = self._single_list(input_tensors, "reduce_scatter")
        self._check_count(ins, "reduce_scatter", "input tensors")
        self._check_numels(ins, out.numel(), "reduce_scatter", "input")
        return self._reduce_scatter("reduce_scatter", out, lambda: torch.cat(
            [_contiguous(t).view(-1) for t in ins]), ins[0], opts)

    def _reduce_scatter_base(self, output, input, opts=None):  # noqa: A002 - torch's name
        if input.numel() != output.numel() * self.size():
            raise ValueError("kolo reduce_scatter_tensor: the input has %d elements, the output "
                             "%d x group size %d = %d" % (input.numel(), output.numel(),
                                                         self.size(),
                                                         output.numel() * self.size()))
        return self._reduce_scatter("reduce_scatter_tensor", output,
                                    lambda: _contiguous(input).view(-1), input, opts)

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        works = [self._reduce_scatter_base(o, i, opts) for o, i in zip(outputs, inputs)]
        return works[-1] if works else completed_work("reduce_scatter of no tensors", [])

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes,  # noqa: A002
                      opts=None):
        if input.dim() == 0:
            raise ValueError("kolo all_to_all_single: the input needs a first dimension")
        splits = [int(s) for s in input_split_sizes]
        if not splits:
            if input.shape[0] % self.size():
                raise ValueError("kolo all_to_all_single: %d rows do not split evenly over %d "
                                 "ranks; pass input_split_sizes" % (input.shape[0], self.size()))
            splits = [input.shape[0] // self.size()] * self.size()
        expected = [int(s) for s in output_split_sizes]
        name = self._names.name("alltoall", signature(input, any_rows=True))

        def finish(received, received_splits):
            if expected and list(received_splits) != expected:
                raise ValueError("output_split_sizes %s, but the ranks sent %s rows"
                                 % (expected, list(received_splits)))
            if received.numel() != output.numel():
                raise ValueError("the output has %d elements, the ranks sent %d"
                                 % (output.numel(), received.numel()))
            output.copy_(received.view(output.shape))
            return [output]
        return self._alltoall(name, input, splits, finish)

    def alltoall(self, output_tensors, input_tensors, opts=None):
        self._check_count(input_tensors, "alltoall", "input tensors")
        self._check_count(output_tensors, "alltoall", "output tensors")
        flat = torch.cat([_contiguous(t).view(-1) for t in input_tensors])
        splits = [t.numel() for t in input_tensors]
        name = self._names.name("alltoall", signature(flat, any_rows=True))

        def finish(received, received_splits):
            if list(received_splits) != [o.numel() for o in output_tensors]:
                raise ValueError("the output tensors hold %s elements, the ranks sent %s"
                                 % ([o.numel() for o in output_tensors], list(received_splits)))
            at = 0
            for o in output_tensors:
                o.copy_(received[at:at + o.numel()].view(o.shape))
                at += o.numel()
            return output_tensors
        return self._alltoall(name, flat, splits, finish)

    def reduce(self, tensors, opts=None):
        t = self._single(tensors, "reduce")
        root = self._root(opts, "reduce")
        op, op_name = self._reduce_op(opts, "reduce")
        name = self._names.name("reduce", signature(t), ".%s.root%d" % (op_name, root))
        buf = t.detach().clone(memory_format=torch.contiguous_format)

        def finish():
            if self.rank() == root:
                t.copy_(buf)
            return [t]
        return self._issue("reduce", [name], [t, buf],
                           lambda: [self._allreduce_args(name, buf, op)], finish)

    def scatter(self, output_tensors, input_tensors, opts=None):
        out = self._single(output_tensors, "scatter")
        root = self._root(opts, "scatter")
        n = out.numel()
        if self.rank() == root:
            ins = self._single_list(input_tensors, "scatter")
            self._check_count(ins, "scatter", "input tensors on the root")
            self._check_numels(ins, n, "scatter", "input")
            buf = torch.cat([_contiguous(t).view(-1) for t in ins])
        else:
            buf = torch.empty(n * self.size(), dtype=out.dtype, device=out.device)
        name = self._names.name("scatter", signature(buf), ".root%d" % root)

        def submit():
            fn, args = _ops._broadcast_args(name, buf, buf, root, self._set)
            return fn(*args), buf

        def finish():
            r = self.rank()
            out.copy_(buf[r * n:(r + 1) * n].view(out.shape))
            return [out]
        return self._issue("scatter", [name], [out, buf], lambda: [submit()], finish)

    def barrier(self, opts=None):
        what = "barrier #%d on %s" % (self._names.next_seq(), self._desc)
        for work in list(self._pending):
            work._done.wait()
        self._pending = []
        try:
            _k.barrier(self._set)
        except _k.KoloError as e:
            raise backend_error("kolo %s failed: %s" % (what, e)) from e
        return completed_work(what, [])

    def send(self, tensors, dst, tag=0):
        raise self._no_p2p("send")

    def recv(self, tensors, src, tag=0):
        raise self._no_p2p("recv")

    def recv_anysource(self, tensors, tag=0):
        raise self._no_p2p("recv")

    # ---- helpers ------------------------------------------------------------------------------

    # torch >= 2.15 calls the tensor forms by new names (the trampoline falls back to the old
    # ones only for all_to_all_single and the coalesced forms).
    all_gather_single = _allgather_base
    reduce_scatter_single = _reduce_scatter_base
    all_gather_single_coalesced = allgather_into_tensor_coalesced
    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced
    all_to_all_single = alltoall_base

    def _no_p2p(self, what):
        return backend_error(
            "kolo %s on %s: point-to-point messages are not offered by the kolo backend (kolo "
            "negotiates collectives, which every rank of a group issues; a send has no "
            "counterpart to match). Use a gloo group beside it for point-to-point: "
            "dist.new_group(backend='gloo')" % (what, self._desc))

    def _single(self, tensors, what):
        tensors = list(tensors)
        if len(tensors) != 1:
            raise ValueError("kolo %s: one tensor per process (one device per process), got %d"
                             % (what, len(tensors)))
        return tensors[0]

    def _single_list(self, lists, what):
        lists = list(lists)
        if len(lists) != 1:
            raise ValueError("kolo %s: one list of tensors per process (one device per "
                             "process), got %d" % (what, len(lists)))
        return list(lists[0])

    def _check_count(self, tensors, what, which):
        if len(tensors) != self.size():
            raise ValueError("kolo %s: %d %s for a group of %d ranks"
                             % (what, len(tensors), which, self.size()))

    def _check_numels(self, tensors, n, what, which):
        for i, t in enumerate(tensors):
            if t.numel() != n:
                raise ValueError("kolo %s: %s tensor %d has %d elements, expected %d"
                                 % (what, which, i, t.numel(), n))

    def _root(self, opts, what):
        root = int(getattr(opts, "rootRank", 0)) if opts is not None else 0
        if not 0 <= root < self.size():
            raise ValueError("kolo %s: root rank %d is not a rank of %s"
                             % (what, root, self._desc))
        return root

    def _reduce_op(self, opts, what):
        red = getattr(opts, "reduceOp", None) if opts is not None else None
        kind = _RED.SUM if red is None else red.op
        if kind not in _REDUCE_OPS:
            reason = ("torch gives a Python backend no way to read PREMUL_SUM's factor; "
                      "scale the tensor and use SUM" if kind == _RED.PREMUL_SUM else
                      "kolo reduces with SUM, AVG, MIN, MAX and PRODUCT")
            raise ValueError("kolo %s: reduction %s is not supported (%s)"
                             % (what, str(kind).split(".")[-1], reason))
        return _REDUCE_OPS[kind]

    def _allreduce_args(self, name, t, op):
        """Submits an in-place allreduce of ``t`` (through a contiguous copy if needed) and
        returns (handle, buffer)."""
        _check_tensor(t, "allreduce", name, self._set, cuda_ok=True)
        buf = _contiguous(t)
        cap = _capsule(buf)
        h = _k.allreduce_async(name, cap, cap, _DTYPES[buf.dtype], int(op), 1.0, 1.0, self._set,
                               _ready_stream(buf))
        return h, buf

    @staticmethod
    def _copy_back(tensors, bufs):
        def finish():
            with torch.no_grad():
                for t, b in zip(tensors, bufs):
                    if b is not t:
                        t.copy_(b)
            return list(tensors)
        return finish

    def _gather(self, name, inp, finish):
        flat = _contiguous(inp).reshape(-1)
        holder = {}

        def submit():
            _check_tensor(inp, "allgather", name, self._set, cuda_ok=True)
            h = _k.allgather_async(name, _capsule(flat), _DTYPES[flat.dtype], self._set,
                                   _ready_stream(flat))
            holder["h"] = h
            return h, flat

        def done():
            return finish(_ops._allgather_result(holder["h"], flat.dtype)())
        return self._issue("allgather", [name], [inp], lambda: [submit()], done)

    def _reduce_scatter(self, what, out, flat_input, like, opts):
        op, op_name = self._reduce_op(opts, what)
        name = self._names.name("reducescatter", signature(like) + "x%d" % self.size(),
                                "." + op_name)
        n = out.numel()
        holder = {}

        def submit():
            _check_tensor(like, "reducescatter", name, self._set, cuda_ok=True)
            flat = flat_input()
            holder["flat"] = flat
            if op in (Sum, Average):
                h = _k.reducescatter_async(name, _capsule(flat), _DTYPES[flat.dtype], int(op),
                                           1.0, 1.0, self._set, _ready_stream(flat))
            else:  # kolo's reducescatter reduces with Sum and Average only
                cap = _capsule(flat)
                h = _k.allreduce_async(name, cap, cap, _DTYPES[flat.dtype], int(op), 1.0, 1.0,
                                       self._set, _ready_stream(flat))
            holder["h"] = h
            return h, flat

        def finish():
            if op in (Sum, Average):
                part = _ops._allgather_result(holder["h"], out.dtype)()
            else:
                r = self.rank()
                part = holder["flat"][r * n:(r + 1) * n]
            out.copy_(part.view(out.shape))
            return [out]
        return self._issue(what, [name], [out], lambda: [submit()], finish)

    def _alltoall(self, name, inp, splits, finish):
        holder = {}

        def submit():
            _check_tensor(inp, "alltoall", name, self._set, cuda_ok=True)
            buf = _contiguous(inp)
            h = _k.alltoall_async(name, _capsule(buf), _DTYPES[buf.dtype], splits, self._set,
                                  _ready_stream(buf))
            holder["h"] = h
            return h, buf

        def done():
            h = holder["h"]
            received_splits = h.received_splits()
            received = _ops._allgather_result(h, inp.dtype)()
            return finish(received, received_splits)
        return self._issue("alltoall", [name], [inp], lambda: [submit()], done)

    def _issue(self, collective, names, keep, submissions, finish):
        def submit_all():
            return submissions(), finish
        return self._issue_many(collective, names, keep, submit_all)

    def _issue_many(self, collective, names, keep, submit_all):
        """Submits a collective's kolo operations and returns its Work. ``submit_all()`` returns
        ([(handle, buffer)...], finish). A name still in flight from PERIOD operations ago is
        waited for first (kolo takes one operation per name at a time)."""
        what = "%s #%d on %s" % (collective, self._names.next_seq(), self._desc)
        for n in names:
            prev = self._in_flight.get(n)
            if prev is not None:
                prev._done.wait()
        try:
            pairs, finish = submit_all()
        except _k.KoloError as e:
            raise backend_error("kolo %s refused: %s" % (what, e)) from e
        work = KoloWork(what, [h for h, _ in pairs], [keep, [b for _, b in pairs]], finish)
        for n in names:
            self._in_flight[n] = work
        self._pending = [w for w in self._pending if not w.is_completed()]
        self._pending.append(work)
        self._completer.add(work)
        return work
