"""DistributedOptimizer for kolo.torch, with the semantics of Horovod's
horovod.torch.optimizer._DistributedOptimizer.

The returned optimizer is an instance of a class made on the fly that derives from the wrapped
optimizer's class (so ``isinstance(opt, torch.optim.SGD)`` holds) with the distributed
behaviour mixed in first. A hook on each parameter's gradient accumulator submits the
parameter's all-reduce (in place on ``p.grad``, named ``"allreduce.<parameter name>"``) as soon
as backward has produced that gradient, so communication overlaps the rest of backward;
``step()`` first waits for all of them (``synchronize()``). With op=Adasum and more than one
rank the mixin is adasum_optimizer's instead (Horovod's Adasum optimizer).
"""

import os
import warnings
from contextlib import contextmanager

import torch

from kolo.torch.compression import Compression
from kolo.torch.functions import broadcast_object
from kolo.torch.mpi_ops import allreduce_async_, grouped_allreduce_async_, sparse_allreduce_async
from kolo.torch.mpi_ops import synchronize
from kolo.torch.mpi_ops import size
from kolo.torch.mpi_ops import Average, Adasum
from kolo.torch.mpi_ops import global_process_set
from kolo.torch.process_sets import _as_set, _process_set_id


def _split_list(items, n):
    """``items`` cut into ``n`` consecutive parts whose lengths differ by at most one."""
    q, r = divmod(len(items), n)
    parts = []
    start = 0
    for i in range(n):
        end = start + q + (1 if i < r else 0)
        parts.append(items[start:end])
        start = end
    return parts


def _not_compiled(hook):
    """``hook`` kept out of torch.compile, and so out of the graph that compiled autograd
    (torch._dynamo's) traces from the backward pass: it submits kolo operations, which the
    compiler cannot trace. torch.compiler.disable where it exists (torch >= 2.1); ``hook``
    itself on older torch, which has no compiler."""
    disable = getattr(getattr(torch, "compiler", None), "disable", None)
    return hook if disable is None else disable(hook)


class _GradientHooks(object):
    """What the two distributed optimizers (this file's and adasum_optimizer's) share: the
    parameters' names, a hook on each gradient accumulator, the count of backward passes before
    a parameter's communication starts, and the guard on zero_grad()."""

    def _init_gradient_hooks(self, named_parameters, backward_passes_per_step):
        """Checks ``named_parameters`` (a list of (name, parameter)) against the parameter
        groups and sets up the state the hooks share."""
        if any(not isinstance(p, tuple) for p in named_parameters):
            raise ValueError("named_parameters should be a sequence of tuples (name, parameter), "
                             "usually produced by model.named_parameters().")

        dups = _GradientHooks.find_duplicates([k for k, _ in named_parameters])
        if dups:
            raise ValueError("Parameter names in named_parameters must be unique. "
                             "Found duplicates: %s" % ", ".join(sorted(dups)))

        all_param_ids = {id(v) for param_group in self.param_groups
                         for v in param_group["params"]}
        named_param_ids = {id(v) for _, v in named_parameters}
        unnamed_param_ids = all_param_ids - named_param_ids
        if unnamed_param_ids:
            raise ValueError("named_parameters was specified, but one or more model parameters "
                             "were not named. Python object ids: %s"
                             % ", ".join(str(i) for i in unnamed_param_ids))

        self._parameter_names = {v: k for k, v in sorted(named_parameters, key=lambda kv: kv[0])}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {v: self.backward_passes_per_step for _, v in named_parameters}

        self._handles = {}
        self._grad_accs = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True

    @staticmethod
    def find_duplicates(lst):
        seen = set()
        dups = set()
        for el in lst:
            if el in seen:
                dups.add(el)
            seen.add(el)
        return dups

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step

    def _hook_gradient(self, p):
        """Calls ``self._make_hook(p)``'s hook each time backward has added a gradient into
        ``p.grad``."""
        self._requires_update.add(p)
        # The gradient accumulator of p: its hook runs once backward has added this pass's
        # gradient into p.grad. Kept referenced so it stays the same node.
        grad_acc = p.expand_as(p).grad_fn.next_functions[0][0]
        grad_acc.register_hook(_not_compiled(self._make_hook(p)))
        self._grad_accs.append(grad_acc)

    def _count_backward_pass(self, p):
        """Counts one more backward pass's gradient of ``p``; True when it is the last one
        before the parameter's communication (backward_passes_per_step of them)."""
        if p in self._handles and self._handles[p][0] is not None:
            if self._allreduce_delay[p] <= 0:
                raise AssertionError(
                    "Gradients were computed more than backward_passes_per_step times "
                    "before call to step(). Increase backward_passes_per_step to "
                    "accumulate gradients locally.")
        assert not p.grad.requires_grad
        assert self._allreduce_delay[p] > 0
        self._allreduce_delay[p] -= 1
        return self._allreduce_delay[p] == 0

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but "
                                 "before optimizer.step() or optimizer.synchronize(). This is "
                                 "prohibited as it can cause a race condition.")
        return super().zero_grad(*args, **kwargs)


class _DistributedOptimizer(_GradientHooks):
    """Mixed in before the wrapped optimizer's class; see DistributedOptimizer()."""

    def __init__(self, params, named_parameters, compression,
                 backward_passes_per_step=1, op=Average,
                 gradient_predivide_factor=1.0,
                 groups=None,
                 sparse_as_dense=False,
                 process_set=global_process_set):
        super().__init__(params)
        self._compression = compression

        if named_parameters is not None:
            named_parameters = list(named_parameters)
        else:
            named_parameters = [("allreduce.noname.%d.%d" % (i, j), v)
                                for i, param_group in enumerate(self.param_groups)
                                for j, v in enumerate(param_group["params"])]
        self._init_gradient_hooks(named_parameters, backward_passes_per_step)
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self.process_set = _as_set(process_set)

        if groups is not None:
            if not (isinstance(groups, list) or groups > 0):
                raise ValueError("groups should be a non-negative integer or a list of list of "
                                 "torch.Tensor.")
            if isinstance(groups, list):
                grouped_ids = set()
                for group in groups:
                    for p in group:
                        if not isinstance(p, torch.Tensor):
                            raise ValueError("groups must consist of torch.Tensor.")
                        if id(p) in grouped_ids:
                            raise ValueError("A parameter can only appear once in groups.")
                        grouped_ids.add(id(p))
        self._groups = groups
        self._p_to_group = {}
        self._group_counts = {}

        # A rank outside the process set communicates nothing: its step() applies its own
        # gradients (as in Horovod).
        if self.process_set.included() and (size() > 1 or
                                            os.environ.get("HOROVOD_ELASTIC") == "1"):
            self._register_hooks()

    def load_state_dict(self, *args, **kwargs):
        self._handles = {}
        self._synchronized = False
        self._should_synchronize = True
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        super().load_state_dict(*args, **kwargs)

    def _register_hooks(self):
        if self._groups is not None:
            p_list = [p for param_group in self.param_groups for p in param_group["params"]
                      if p.requires_grad]
            # Every rank forms the same groups, in rank 0's order of parameters.
            p_list_names = [self._parameter_names.get(p) for p in p_list]
            p_list_names = broadcast_object(p_list_names, root_rank=self.process_set.ranks[0],
                                            name="DistributedOptimizer.parameter_order",
                                            process_set=self.process_set)
            order = {n: i for i, n in enumerate(p_list_names)}
            p_list = sorted(p_list, key=lambda p: order[self._parameter_names.get(p)])

            if isinstance(self._groups, list):
                p_groups = []
                grouped_ids = set()
                p_list_ids = {id(p) for p in p_list}
                for group in self._groups:
                    p_groups.append([p for p in group if id(p) in p_list_ids])
                    grouped_ids.update(id(p) for p in p_groups[-1])
                for p in p_list:
                    if id(p) not in grouped_ids:
                        p_groups.append([p])
            else:
                p_groups = _split_list(p_list, self._groups)

            p_groups = [tuple(g) for g in p_groups if g]
            for group in p_groups:
                for p in group:
                    self._p_to_group[p] = group
                self._group_counts[group] = 0

        for param_group in self.param_groups:
            for p in param_group["params"]:
                if p.requires_grad:
                    self._hook_gradient(p)

    def _scale_factors(self):
        if self.op == Average:
            # The average's division by size() happens in kolo (op Average); only the user's
            # predivision is split across the two factors.
            return 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
        return 1.0, 1.0

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            # No gradient this step (an unused parameter), but other ranks may have one: the
            # all-reduce must happen everywhere.
            p.grad = p.data.new(p.size()).zero_()

        name = self._parameter_names.get(p)
        tensor = p.grad

        if p.grad.is_sparse:
            if self.sparse_as_dense:
                tensor = tensor.to_dense()
            else:
                return self._sparse_allreduce_grad_async(p, name)

        tensor_compressed, ctx = self._compression.compress(tensor)
        prescale_factor, postscale_factor = self._scale_factors()
        handle = allreduce_async_(tensor_compressed, name=name, op=self.op,
                                  prescale_factor=prescale_factor,
                                  postscale_factor=postscale_factor,
                                  process_set=self.process_set)
        return handle, ctx

    def _grouped_allreduce_grad_async(self, ps):
        name = self._parameter_names.get(ps[0])
        tensors_compressed, ctxs = zip(*[self._compression.compress(p.grad) for p in ps])
        prescale_factor, postscale_factor = self._scale_factors()
        handle = grouped_allreduce_async_(list(tensors_compressed), name=name, op=self.op,
                                          prescale_factor=prescale_factor,
                                          postscale_factor=postscale_factor,
                                          process_set=self.process_set)
        return handle, ctxs

    def _sparse_allreduce_grad_async(self, p, name):
        handle = sparse_allreduce_async(p.grad, name=name, op=self.op,
                                        process_set=self.process_set)
        return handle, None

    def _make_hook(self, p):
        def hook(*ignore):
            handle, ctx = None, None
            if self._count_backward_pass(p):
                if self._groups is not None:
                    group = self._p_to_group[p]
                    self._group_counts[group] += 1
                    if self._group_counts[group] == len(group):
                        handle, ctxs = self._grouped_allreduce_grad_async(group)
                        self._handles[group] = (handle, ctxs)
                        # drop the placeholders of the group's earlier hook calls
                        for gp in group:
                            self._handles.pop(gp, None)
                        self._group_counts[group] = 0
                        return
                else:
                    handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def synchronize(self):
        """Waits for every gradient's all-reduce (submitting those backward did not trigger)
        and puts the results into the gradients."""
        if not self.process_set.included():
            # A rank outside the process set: nothing to reduce (as in Horovod).
            self._synchronized = True
            return
        completed = set()
        for x in self._handles.keys():
            if isinstance(x, tuple):
                completed.update(x)
            else:
                completed.add(x)
        for p in self._requires_update - completed:
            self._handles[p] = self._allreduce_grad_async(p)

        for p, (handle, ctx) in list(self._handles.items()):
            if handle is None:
                self._handles[p] = self._allreduce_grad_async(p)

        try:
            for p, (handle, ctx) in self._handles.items():
                if isinstance(p, tuple):
                    outputs = synchronize(handle)
                    for gp, output, gctx in zip(p, outputs, ctx):
                        self._allreduce_delay[gp] = self.backward_passes_per_step
                        gp.grad.set_(self._compression.decompress(output, gctx))
                    if self._groups is not None and self._group_counts[p] != 0:
                        self._group_counts[p] = 0
                else:
                    # a callable handle (sparse) returns the reduced tensor itself
                    output = handle() if callable(handle) else synchronize(handle)
                    self._allreduce_delay[p] = self.backward_passes_per_step
                    if self._groups is not None:
                        group = self._p_to_group[p]
                        if self._group_counts[group] != 0:
                            self._group_counts[group] = 0
                    if p.grad.is_sparse:
                        aggregated = self._compression.decompress(output, ctx)
                        if not aggregated.is_sparse:
                            aggregated = aggregated.to_sparse()
                        p.grad.zero_().add_(aggregated)
                    else:
                        p.grad.set_(self._compression.decompress(output, ctx))
        finally:
            self._handles.clear()

        self._synchronized = True

    @contextmanager
    def skip_synchronize(self):
        """step() inside this context does not synchronize; for use after an explicit
        synchronize(), e.g. to clip gradients:

            optimizer.synchronize()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            with optimizer.skip_synchronize():
                optimizer.step()
        """
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() "
                              "context after optimizer.synchronize(). This can cause training "
                              "slowdown. You may want to consider using "
                              "optimizer.skip_synchronize() context if you use "
                              "optimizer.synchronize() in your code.")
            self.synchronize()
        self._synchronized = False
        return super().step(closure)


def DistributedOptimizer(optimizer, named_parameters=None,
                         compression=Compression.none,
                         backward_passes_per_step=1,
                         op=Average,
                         gradient_predivide_factor=1.0,
                         num_groups=0, groups=None,
                         sparse_as_dense=False,
                         process_set=global_process_set):
    """An optimizer that wraps ``optimizer`` and all-reduces each gradient over the ranks
    before applying it, as Horovod's DistributedOptimizer.

    Each gradient's all-reduce starts as soon as backward has produced it; ``step()`` waits for
    all of them first. ``synchronize()`` does that wait explicitly (then use
    ``skip_synchronize()`` around ``step()``), e.g. to clip the reduced gradients.

    Arguments:
        optimizer: the torch.optim.Optimizer to wrap (its parameter groups are shared; its
            state, if any, is not carried over).
        named_parameters: (name, parameter) pairs naming the all-reduces, typically
            ``model.named_parameters()``; every rank must use the same names.
        compression: Compression.none or Compression.fp16 (gradients cross the wire as
            float16).
        backward_passes_per_step: backward passes accumulated locally before the all-reduce.
        op: Average (default) or Sum (Min, Max, Product also pass through), or Adasum:
            Horovod's Adasum optimizer (see adasum_optimizer), which runs the wrapped optimizer
            on each rank's own gradients and combines the ranks' parameter updates with
            allreduce(op=Adasum) in step(); the global process set only, at a power-of-two
            number of ranks (NotImplementedError otherwise); synchronize() does nothing and
            skip_synchronize() raises AssertionError. With one rank, as the other ops.
        gradient_predivide_factor: with op == Average, gradients are scaled by
            1 / gradient_predivide_factor before the sum and by gradient_predivide_factor / size
            after it.
        num_groups: deprecated, use ``groups``.
        groups: an int (that many groups of consecutive parameters) or a list of lists of
            parameters; each group is reduced together once all its gradients are ready.
        sparse_as_dense: reduce sparse gradients as dense tensors.
        process_set: the ranks whose gradients are averaged (default: all); on a rank outside
            it, nothing is communicated and step() applies the rank's own gradients.
    """
    _process_set_id(process_set, "DistributedOptimizer")
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")

    if num_groups != 0:
        warnings.warn("Parameter `num_groups` has been replaced by `groups` and will be removed "
                      "in v0.23.0.", DeprecationWarning)
        if groups is None:
            groups = num_groups

    if backward_passes_per_step <= 0:
        raise ValueError("backward_passes_per_step must be > 0")

    base = optimizer.__class__
    if op != Adasum or size() == 1:
        cls = type(base.__name__, (_DistributedOptimizer, base), {"__module__": __name__})
        distributed = cls(optimizer.param_groups, named_parameters, compression,
                          backward_passes_per_step, op, gradient_predivide_factor, groups,
                          sparse_as_dense, process_set)
    else:
        # Horovod's Adasum optimizer: groups and sparse_as_dense do not apply to it.
        from kolo.torch.adasum_optimizer import _DistributedAdasumOptimizer

        if _process_set_id(process_set) != global_process_set.process_set_id:
            raise NotImplementedError("Adasum does not support non-global process sets yet.")
        n = size()
        if n & (n - 1):
            # Refused here, on every rank alike, before a backward pass has stepped any
            # parameter; Horovod raises from the first gradient hook.
            raise NotImplementedError(
                "kolo: DistributedOptimizer(op=Adasum) needs a power-of-two number of ranks "
                "(Adasum combines the ranks' updates pairwise over a binary tree); this job "
                "has %d" % n)
        cls = type(base.__name__, (_DistributedAdasumOptimizer, base), {"__module__": __name__})
        distributed = cls(optimizer.param_groups, named_parameters, compression,
                          backward_passes_per_step)
    # The wrapped class was constructed from the parameter groups alone (its constructor's
    # defaults were not passed): keep the original defaults for add_param_group().
    distributed.defaults = dict(optimizer.defaults)
    return distributed
