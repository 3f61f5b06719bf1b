"""Helpers over kolo.torch's collectives, as horovod.torch.functions: broadcasting a model's
parameters and an optimizer's state, and broadcasting or all-gathering any picklable object.

Objects cross the wire as pickle bytes in a uint8 tensor (the standard library's pickle, so
they must be picklable by it: no lambdas or local classes)."""

import collections
import pickle

import numpy as np
import torch

from kolo.torch.mpi_ops import allgather, broadcast_, broadcast_async_, synchronize
from kolo.torch.mpi_ops import rank
from kolo.torch.mpi_ops import global_process_set
from kolo.torch.process_sets import ProcessSet, _as_set, _process_set_id


def _bytes_tensor(payload):
    """A uint8 tensor holding a copy of ``payload`` (bytes)."""
    return torch.from_numpy(np.frombuffer(payload, dtype=np.uint8).copy())


def broadcast_parameters(params, root_rank, process_set=global_process_set):
    """Broadcasts parameters in place from ``root_rank`` to all other ranks.

    Arguments:
        params: ``model.state_dict()`` (or any dict name -> tensor), or a list of tensors or of
            (name, tensor) pairs such as ``list(model.named_parameters())``. Dicts are sent in
            order of their sorted names, so every rank must pass the same names.
        root_rank: the rank whose values everybody gets (a global rank, even with a process
            set, as in Horovod).
        process_set: the ranks that take part (default: all).
    """
    _process_set_id(process_set, "broadcast_parameters")
    if isinstance(params, dict):
        params = sorted(params.items())
    elif isinstance(params, (list, tuple)) or (
            hasattr(params, "__iter__") and not isinstance(params, (torch.Tensor, str))):
        params = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError("invalid params of type: %s" % type(params))

    handles = [broadcast_async_(p, root_rank, name, process_set=process_set)
               for name, p in params]
    for handle in handles:
        synchronize(handle)


def broadcast_optimizer_state(optimizer, root_rank, model=None, process_set=global_process_set):
    """Broadcasts an optimizer's state (per-parameter tensors such as momentum buffers, and
    the hyperparameters of each parameter group) from ``root_rank`` to all other ranks.

    A new optimizer has no state yet; as in Horovod, it is created here by one step with zero
    gradients (for a DistributedOptimizer, the wrapped optimizer's step, which communicates
    nothing), which leaves parameters unchanged for SGD (with or without momentum) and Adam
    unless weight decay is set. Tensors in the state are broadcast in place; everything else
    (learning rate, betas, step counts kept as numbers...) is broadcast as one pickled object.

    Arguments:
        optimizer: a torch.optim.Optimizer or a DistributedOptimizer.
        root_rank: the rank whose state everybody gets (a global rank, even with a process
            set, as in Horovod).
        model: (optional, Horovod's third argument) the model, used to identify sparse
            parameters: the zero gradients of the parameters of its ``nn.Embedding(...,
            sparse=True)`` modules are sparse for torch.optim.SGD (always for SparseAdam), as
            their real gradients will be.
        process_set: the ranks that take part (default: all; kolo's addition, a keyword
            after Horovod's arguments).
    """
    from kolo.torch.optimizer import _GradientHooks

    if isinstance(model, ProcessSet):
        raise TypeError("broadcast_optimizer_state: the third argument is Horovod's model; pass "
                        "the process set as process_set=...")
    _process_set_id(process_set, "broadcast_optimizer_state")
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")

    state_dict = optimizer.state_dict()

    # The parameters of sparse embeddings, as Horovod finds them.
    sparse_params = set()
    if model is not None:
        for m in model.modules():
            if isinstance(m, torch.nn.Embedding) and m.sparse:
                sparse_params.update(id(p) for p in m.parameters())

    # A new optimizer has no state: make it by a step with zero gradients.
    if len(state_dict["state"]) == 0:
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.requires_grad and id(p) not in state_dict["state"]:
                    p.grad = p.data.new(p.size()).zero_()
                    if isinstance(optimizer, torch.optim.SparseAdam) or (
                            isinstance(optimizer, torch.optim.SGD) and id(p) in sparse_params):
                        p.grad = p.grad.to_sparse()
        if isinstance(optimizer, _GradientHooks):
            # The wrapped optimizer's step: the distributed one (Adasum's too) would all-reduce,
            # and deadlock unless every rank stepped too.
            super(_GradientHooks, optimizer).step()
        else:
            optimizer.step()
        state_dict = optimizer.state_dict()

    # Still empty: a stateless optimizer (plain SGD), nothing to broadcast.
    if len(state_dict["state"]) == 0:
        return

    tensors = []
    scalars = {}
    callbacks = {}
    occurrences = collections.defaultdict(int)

    def state_setter(pid, name):
        def assign(value):
            # state_dict()'s per-parameter dicts are the optimizer's own
            state_dict["state"][pid][name] = value
        return assign

    def option_setter(index, key):
        def assign(value):
            optimizer.param_groups[index][key] = value
        return assign

    for index, group in enumerate(state_dict["param_groups"]):
        for key, value in group.items():
            if key == "params":
                continue
            full_key = "%s.%d" % (key, index)
            scalars[full_key] = value
            callbacks[full_key] = option_setter(index, key)

        for pid in group["params"]:
            if pid not in state_dict["state"]:
                continue  # no state for this parameter (requires_grad False)
            for name, value in state_dict["state"][pid].items():
                # names repeat from parameter to parameter: number them in order
                occurrences[name] += 1
                full_key = "%s.%d" % (name, occurrences[name])
                if torch.is_tensor(value):
                    tensors.append((full_key, value))
                else:
                    scalars[full_key] = value
                    callbacks[full_key] = state_setter(pid, name)

    broadcast_parameters(tensors, root_rank, process_set=process_set)
    scalars = broadcast_object(scalars, root_rank, name="optimizer_state.scalars",
                               process_set=process_set)
    for key, value in scalars.items():
        callbacks[key](value)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Pickles ``obj`` on ``root_rank`` and returns it, unpickled, on every rank.

    Arguments:
        obj: any object the standard library's pickle handles (ignored on other ranks).
        root_rank: the rank whose object everybody gets (a global rank, as in Horovod).
        name: the operations' base name. Defaults to "broadcast_object" (not the object's
            type name as in Horovod: the other ranks' objects, often None, have other types).
        process_set: the ranks that take part (default: all).
    """
    _process_set_id(process_set, "broadcast_object")
    if name is None:
        name = "broadcast_object"

    if rank() == root_rank:
        # A pickling failure is announced (length -1) before it is raised, so the other ranks
        # raise too instead of waiting for the payload.
        try:
            payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as error:
            broadcast_(torch.tensor([-1], dtype=torch.int64), root_rank, name + ".sz",
                       process_set=process_set)
            raise ValueError("broadcast_object: rank %d cannot pickle the object: %s"
                             % (root_rank, error)) from error
        data = _bytes_tensor(payload)
        length = torch.tensor([data.numel()], dtype=torch.int64)
        broadcast_(length, root_rank, name + ".sz", process_set=process_set)
    else:
        length = torch.zeros(1, dtype=torch.int64)
        broadcast_(length, root_rank, name + ".sz", process_set=process_set)
        if int(length.item()) < 0:
            raise ValueError("broadcast_object: rank %d could not pickle its object"
                             % root_rank)
        data = torch.empty(int(length.item()), dtype=torch.uint8)

    broadcast_(data, root_rank, name + ".t", process_set=process_set)

    if rank() != root_rank:
        obj = pickle.loads(data.numpy().tobytes())
    return obj


def allgather_object(obj, name=None, process_set=global_process_set):
    """Pickles ``obj`` on every rank and returns the list of all ranks' objects, in rank order
    (of ``process_set``'s ranks, by default all).

    Arguments:
        obj: any object the standard library's pickle handles.
        name: the operations' base name. Defaults to "allgather_object" (not the object's
            type name as in Horovod, which may differ from rank to rank).
        process_set: the ranks that take part (default: all).
    """
    _process_set_id(process_set, "allgather_object")
    if name is None:
        name = "allgather_object"

    try:
        payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        failure = None
    except Exception as error:  # announced (length -1) so every rank raises, then raised
        payload, failure = b"", error
    data = _bytes_tensor(payload)
    length = torch.tensor([data.numel() if failure is None else -1], dtype=torch.int64)

    lengths = allgather(length, name=name + ".sz", process_set=process_set).tolist()
    if min(lengths) < 0:
        ranks = _as_set(process_set).ranks
        bad = [ranks[r] for r, n in enumerate(lengths) if n < 0]
        raise ValueError("allgather_object: rank(s) %s cannot pickle their object%s"
                         % (",".join(map(str, bad)),
                            ": %s" % failure if failure is not None else "")) from failure
    gathered = allgather(data, name=name + ".t", process_set=process_set).numpy()

    objects = []
    offset = 0
    for n in lengths:
        objects.append(pickle.loads(gathered[offset:offset + n].tobytes()))
        offset += n
    assert len(objects) == _as_set(process_set).size()
    return objects
