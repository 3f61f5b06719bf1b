"""torch.distributed's names the backend tests share, across torch 1.13 and 2.x."""
import torch.distributed as dist

DistBackendError = getattr(dist, "DistBackendError", RuntimeError)
# torch 1.13's names of the tensor forms; torch 2.x has both.
all_gather_into_tensor = getattr(dist, "all_gather_into_tensor", None) or dist._all_gather_base
reduce_scatter_tensor = getattr(dist, "reduce_scatter_tensor", None) or dist._reduce_scatter_base

OPS = {"Sum": dist.ReduceOp.SUM, "Min": dist.ReduceOp.MIN, "Max": dist.ReduceOp.MAX,
       "Product": dist.ReduceOp.PRODUCT, "Average": dist.ReduceOp.AVG}
