"""SyncBatchNorm: batch normalisation whose statistics span the batch of every rank.

Horovod's ``hvd.SyncBatchNorm``, for CPU tensors too. In training, each rank sums its
elements, their squares and their count per channel; one differentiable ``allreduce`` (Sum)
of those gives the global mean and (biased) variance, which normalise the local batch. The
backward pass needs no code of its own: autograd differentiates through the allreduce, whose
gradient is the allreduce of the incoming gradients (Horovod's rule), which is exactly the
cross-rank term of batch norm's gradient (Ioffe & Szegedy 2015, sec. 3, with the sums taken
over the global batch). Running statistics use the global unbiased variance, like
``torch.nn.SyncBatchNorm``. In eval mode, or with one rank, it is plain batch norm.
"""

import itertools

import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from kolo.torch import mpi_ops

# Modules are created in the same order on every rank, so this index names the same module's
# allreduce everywhere.
_instances = itertools.count()


class SyncBatchNorm(_BatchNorm):
    """Drop-in for ``torch.nn.BatchNorm1d/2d/3d`` with statistics over all ranks' batches.

    Input: (N, C) or (N, C, *); every rank must call forward the same number of times (it is
    collective in training mode). Arguments as ``torch.nn.BatchNorm2d``.
    """

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self._kolo_name = "sync_batch_norm.%d" % next(_instances)

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError("expected at least 2D input (got {}D input)".format(input.dim()))

    def forward(self, input):
        self._check_input_dim(input)
        use_batch_stats = self.training or not self.track_running_stats
        if not use_batch_stats or mpi_ops.size() == 1:
            return super().forward(input)

        channels = input.shape[1]
        dims = [0] + list(range(2, input.dim()))
        x = input.to(torch.float64) if input.dtype in (torch.float16, torch.bfloat16) else input
        count = torch.full((1,), float(input.numel() // channels), dtype=x.dtype)
        local = torch.cat([x.sum(dims), (x * x).sum(dims), count])
        total = mpi_ops.allreduce(local, op=mpi_ops.Sum, name=self._kolo_name)
        n = total[-1]
        if n.item() < 2:
            raise ValueError("SyncBatchNorm: expected more than 1 value per channel over all "
                             "ranks when training, got input size {}".format(list(input.shape)))
        mean = total[:channels] / n
        var = total[channels:2 * channels] / n - mean * mean

        if self.training and self.track_running_stats:
            with torch.no_grad():
                self.num_batches_tracked += 1
                momentum = (1.0 / float(self.num_batches_tracked) if self.momentum is None
                            else self.momentum)
                unbiased = var * (n / (n - 1))
                self.running_mean.mul_(1 - momentum).add_(mean.to(self.running_mean.dtype),
                                                          alpha=momentum)
                self.running_var.mul_(1 - momentum).add_(unbiased.to(self.running_var.dtype),
                                                         alpha=momentum)

        shape = [1, channels] + [1] * (input.dim() - 2)
        y = (x - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        if self.affine:
            y = y * self.weight.view(shape) + self.bias.view(shape)
        return y.to(input.dtype)
