"""kolo.torch: Horovod's ``horovod.torch`` API over kolo, name for name.

    import kolo.torch as hvd   # instead of: import horovod.torch as hvd

What kolo supports today is exported here; the rest of horovod.torch (elastic training) is not
defined yet, so using it fails with AttributeError. CPU tensors, and CUDA tensors where kolo was
built with CUDA and NCCL (every collective; see mpi_ops).
See bindings/python/README.md.
"""

from kolo.torch.compression import Compression
from kolo.torch.functions import (allgather_object, broadcast_object, broadcast_optimizer_state,
                                  broadcast_parameters)
from kolo.torch.mpi_ops import allreduce, allreduce_async, allreduce_, allreduce_async_
from kolo.torch.mpi_ops import (grouped_allreduce, grouped_allreduce_async, grouped_allreduce_,
                                grouped_allreduce_async_)
from kolo.torch.mpi_ops import sparse_allreduce_async
from kolo.torch.mpi_ops import allgather, allgather_async
from kolo.torch.mpi_ops import grouped_allgather, grouped_allgather_async
from kolo.torch.mpi_ops import broadcast, broadcast_async, broadcast_, broadcast_async_
from kolo.torch.mpi_ops import poll, synchronize
from kolo.torch.mpi_ops import init, shutdown
from kolo.torch.mpi_ops import is_initialized, start_timeline, stop_timeline
from kolo.torch.mpi_ops import size, local_size, cross_size, rank, local_rank, cross_rank
from kolo.torch.mpi_ops import is_homogeneous
from kolo.torch.mpi_ops import mpi_threads_supported, mpi_enabled, mpi_built
from kolo.torch.mpi_ops import gloo_enabled, gloo_built
from kolo.torch.mpi_ops import nccl_built, ddl_built, ccl_built, cuda_built, rocm_built
from kolo.torch.process_sets import (ProcessSet, add_process_set, global_process_set,
                                     remove_process_set)
from kolo.torch.mpi_ops import Average, Sum, Adasum, Min, Max, Product
from kolo.torch.mpi_ops import HorovodInternalError
from kolo.torch.exchange_ops import (alltoall, alltoall_async, barrier, grouped_reducescatter,
                                     grouped_reducescatter_async, join, reducescatter,
                                     reducescatter_async)
from kolo.torch.optimizer import DistributedOptimizer
from kolo.torch.sync_batch_norm import SyncBatchNorm

__all__ = [
    "Compression",
    "allgather_object", "broadcast_object", "broadcast_optimizer_state", "broadcast_parameters",
    "allreduce", "allreduce_async", "allreduce_", "allreduce_async_",
    "grouped_allreduce", "grouped_allreduce_async", "grouped_allreduce_",
    "grouped_allreduce_async_",
    "sparse_allreduce_async",
    "allgather", "allgather_async", "grouped_allgather", "grouped_allgather_async",
    "broadcast", "broadcast_async", "broadcast_", "broadcast_async_",
    "poll", "synchronize",
    "init", "shutdown", "is_initialized", "start_timeline", "stop_timeline",
    "size", "local_size", "cross_size", "rank", "local_rank", "cross_rank", "is_homogeneous",
    "mpi_threads_supported", "mpi_enabled", "mpi_built", "gloo_enabled", "gloo_built",
    "nccl_built", "ddl_built", "ccl_built", "cuda_built", "rocm_built",
    "ProcessSet", "global_process_set", "add_process_set", "remove_process_set",
    "Average", "Sum", "Adasum", "Min", "Max", "Product",
    "HorovodInternalError",
    "alltoall", "alltoall_async", "barrier", "join", "reducescatter", "reducescatter_async",
    "grouped_reducescatter", "grouped_reducescatter_async",
    "DistributedOptimizer",
    "SyncBatchNorm",
]
