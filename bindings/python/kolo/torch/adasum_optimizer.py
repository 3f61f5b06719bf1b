"""DistributedOptimizer(op=Adasum) for kolo.torch, with more than one rank: Horovod's Adasum
optimizer (horovod.torch.optimizer._DistributedAdasumOptimizer).

Adasum combines the wrapped optimizer's updates, not the gradients: every rank runs its own
optimizer (its own momentum, its own Adam moments) on its own gradient, and the ranks' parameter
deltas are combined by allreduce(op=Adasum), so that orthogonal updates add and equal ones
average. For each parameter ``p``, with backward_passes_per_step = k:

    k-th backward pass    the hook copies p into start[p], runs the wrapped optimizer's step
    (a hook on p's        on p alone (every group keeps only p, if it has it, for that step),
    gradient accumulator) subtracts start[p], so p holds this rank's delta, and starts the
                          delta's in-place all-reduce with op=Adasum, named after p
    step()                starts the all-reduce of each parameter whose hook did not (backward
                          did not reach it, or fewer than k passes ran), then waits for each
                          and sets p = start[p] + combined delta

so between the k-th backward pass and step() a parameter holds its delta, as in Horovod. The
deltas are not scaled (Horovod's Adasum optimizer passes no prescale or postscale factor).
Like allreduce(op=Adasum): CPU parameters (checked when this is built), the
global process set and a power-of-two number of ranks (checked by DistributedOptimizer()).
"""

from contextlib import contextmanager

import torch

from kolo.torch.mpi_ops import allreduce_async_, synchronize
from kolo.torch.mpi_ops import Adasum
from kolo.torch.optimizer import _GradientHooks


class _DistributedAdasumOptimizer(_GradientHooks):
    """Mixed in before the wrapped optimizer's class; see DistributedOptimizer()."""

    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1):
        super().__init__(params)
        self._compression = compression

        if named_parameters is not None:
            named_parameters = list(named_parameters)
        else:
            # Horovod's names, "allreduce.noname.<i>", with i counted over every group: Horovod
            # restarts it in each group, so that several groups fail its duplicate check.
            params_in_order = [v for param_group in self.param_groups
                               for v in param_group["params"]]
            named_parameters = [("allreduce.noname.%d" % i, v)
                                for i, v in enumerate(params_in_order)]
        self._init_gradient_hooks(named_parameters, backward_passes_per_step)
        # Refused now rather than at the first gradient hook, which would have stepped the
        # parameter before its all-reduce failed.
        for p, name in self._parameter_names.items():
            if p.device.type != "cpu":
                raise NotImplementedError(
                    "kolo: DistributedOptimizer(op=Adasum) combines CPU tensors only, as "
                    "allreduce(op=Adasum) does; parameter '%s' is on %s" % (name, p.device))

        # Each parameter's value before its optimizer step, and after step() the combined one.
        self._starting_models = {p: torch.zeros_like(p, requires_grad=False)
                                 for _, p in named_parameters}
        self._register_hooks()

    def _register_hooks(self):
        for param_group in self.param_groups:
            for p in param_group["params"]:
                if p.requires_grad:
                    # As in Horovod, every parameter starts with a zero gradient, so that a
                    # parameter backward never reached is stepped in step() with a zero
                    # gradient rather than skipped by the wrapped optimizer (which skips a None
                    # gradient); either way its delta is all-reduced, as other ranks may have one.
                    p.grad = p.data.new(p.size()).zero_()
                    self._hook_gradient(p)

    def _allreduce_delta_async(self, p):
        """The wrapped optimizer's step on ``p`` alone, leaving this rank's delta in ``p``, and
        the start of the delta's all-reduce with op=Adasum."""
        name = self._parameter_names.get(p)
        start = self._starting_models[p]

        stashed_params = []
        for group in self.param_groups:
            stashed_params.append(group["params"])
            group["params"] = [p] if any(p is v for v in group["params"]) else []
        try:
            start.data.copy_(p)
            super().step()
            p.data.sub_(start)
            tensor_compressed, ctx = self._compression.compress(p)
            handle = allreduce_async_(tensor_compressed.data, name=name, op=Adasum)
        finally:
            for stashed, group in zip(stashed_params, self.param_groups):
                group["params"] = stashed
        return handle, ctx

    def _make_hook(self, p):
        def hook(*ignore):
            handle, ctx = None, None
            if self._count_backward_pass(p):
                handle, ctx = self._allreduce_delta_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def synchronize(self):
        """Nothing to do: step() combines the deltas (as Horovod's Adasum optimizer, which has
        no separate synchronization)."""
        pass

    @contextmanager
    def skip_synchronize(self):
        raise AssertionError("Skipping synchronization is not supported when using Adasum "
                             "optimizer.")

    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()

        for p in self._requires_update - set(self._handles):
            self._handles[p] = self._allreduce_delta_async(p)
        # step() before the backward_passes_per_step-th pass: the delta of the gradient
        # accumulated so far. Every submission before the first wait, so that ranks whose hooks
        # ran in different orders do not wait for each other's next submission.
        for p, (handle, ctx) in list(self._handles.items()):
            if handle is None:
                self._handles[p] = self._allreduce_delta_async(p)

        try:
            for p, (handle, ctx) in self._handles.items():
                delta = self._compression.decompress(synchronize(handle), ctx)
                start = self._starting_models[p]
                start.data.add_(delta.data)
                p.data.copy_(start)
                self._allreduce_delay[p] = self.backward_passes_per_step
        finally:
            self._handles.clear()
        return loss
