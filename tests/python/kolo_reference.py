"""Rank-unique inputs and locally computed references for the kolo.torch tests.

Every rank can rebuild every other rank's input (the values depend only on a key, the rank and
the dtype), so each rank computes the expected result of a collective by itself, in float64 or
int64, never by asking kolo.
"""
import math
import zlib

import torch

import kolo.torch as hvd

INT_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
HALF_DTYPES = [torch.float16, torch.bfloat16]
FLOAT_DTYPES = HALF_DTYPES + [torch.float32, torch.float64]
ALL_DTYPES = INT_DTYPES + FLOAT_DTYPES + [torch.bool]

OP_NAMES = ["Average", "Sum", "Min", "Max", "Product"]


def dtype_id(dtype):
    return str(dtype).replace("torch.", "")


def op_of(name):
    return getattr(hvd, name)


def generator(*key):
    """A torch.Generator seeded from `key` the same way in every process (no hash())."""
    return torch.Generator().manual_seed(zlib.crc32(repr(key).encode()))


def _int_limit(dtype, op, nranks):
    """Largest |value| such that the reduction of nranks values can't overflow dtype."""
    info = torch.iinfo(dtype)
    bound = min(info.max, -info.min) if info.min < 0 else info.max
    if op == "Product":
        lim = 1
        while lim < 50 and (lim + 1) ** nranks <= bound:
            lim += 1
        return lim
    if dtype == torch.int64:
        return 2 ** 40  # large enough to catch a 32-bit or double-precision path
    return min(bound // nranks, 10 ** 6)


def rank_values(key, rank, dtype, shape, op="Sum", nranks=None):
    """Rank `rank`'s input for test `key`: distinct per rank, in a range where `op` over all
    ranks is exact (integers) or well conditioned (floating point)."""
    nranks = hvd.size() if nranks is None else nranks
    g = generator(key, rank, dtype_id(dtype), tuple(shape))
    shape = tuple(shape)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype in INT_DTYPES:
        lim = _int_limit(dtype, op, nranks)
        lo = 0 if torch.iinfo(dtype).min == 0 else -lim
        return torch.randint(lo, lim + 1, shape, generator=g, dtype=torch.int64).to(dtype)
    if op == "Product":
        mag = torch.rand(shape, generator=g, dtype=torch.float64) * 1.5 + 0.5
        sign = torch.randint(0, 2, shape, generator=g).double() * 2 - 1
        return (mag * sign).to(dtype)
    return (torch.rand(shape, generator=g, dtype=torch.float64) * 20 - 10).to(dtype)


def all_rank_values(key, dtype, shape, op="Sum"):
    n = hvd.size()
    return [rank_values(key, r, dtype, shape, op, n) for r in range(n)]


def _trunc_scale(x, factor):
    """kolo's rule for integers: scale in double, truncate toward zero."""
    if factor == 1.0:
        return x
    return torch.trunc(x.double() * factor).to(torch.int64)


def reference_allreduce(inputs, op, prescale=1.0, postscale=1.0):
    """postscale * reduce_r(prescale * inputs[r]), per kolo.h: integer Average truncates toward
    zero, integer scaling is done in double and truncated; bool Sum/Max = OR, Product/Min = AND."""
    dtype = inputs[0].dtype
    n = len(inputs)
    if dtype == torch.bool:
        stack = torch.stack(inputs)
        if op in ("Sum", "Max"):
            return stack.any(0)
        if op in ("Product", "Min"):
            return stack.all(0)
        raise ValueError("no reference for bool " + op)
    if dtype in INT_DTYPES:
        stack = torch.stack([_trunc_scale(x.to(torch.int64), prescale) for x in inputs])
        if op in ("Sum", "Average"):
            out = stack.sum(0)
            if op == "Average":
                out = torch.div(out, n, rounding_mode="trunc")
        elif op == "Min":
            out = stack.min(0).values
        elif op == "Max":
            out = stack.max(0).values
        else:
            out = stack.prod(0)
        return _trunc_scale(out, postscale).to(dtype)
    stack = torch.stack([x.double() * prescale for x in inputs])
    if op in ("Sum", "Average"):
        out = stack.sum(0)
        if op == "Average":
            out = out / n
    elif op == "Min":
        out = stack.min(0).values
    elif op == "Max":
        out = stack.max(0).values
    else:
        out = stack.prod(0)
    return (out * postscale).to(dtype)


TOLERANCES = {
    torch.float16: dict(rtol=2e-3, atol=2e-3),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2),
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.float64: dict(rtol=1e-12, atol=1e-12),
}


def assert_matches(actual, expected, what=""):
    """Same shape and dtype; exact for integers and bool, per-dtype tolerance for floats."""
    prefix = (what + ": ") if what else ""
    assert isinstance(actual, torch.Tensor), "%sexpected a tensor, got %r" % (prefix, actual)
    assert actual.dtype == expected.dtype, "%sdtype %s, expected %s" % (
        prefix, actual.dtype, expected.dtype)
    assert tuple(actual.shape) == tuple(expected.shape), "%sshape %s, expected %s" % (
        prefix, tuple(actual.shape), tuple(expected.shape))
    if expected.dtype in TOLERANCES:
        torch.testing.assert_close(actual, expected, msg=lambda m: prefix + m,
                                   **TOLERANCES[expected.dtype])
    elif not torch.equal(actual, expected):
        wrong = (actual != expected).reshape(-1)
        idx = int(wrong.nonzero()[0])
        raise AssertionError("%s%d of %d elements differ; first at flat index %d: got %s, "
                             "expected %s" % (prefix, int(wrong.sum()), wrong.numel(), idx,
                                              actual.reshape(-1)[idx].item(),
                                              expected.reshape(-1)[idx].item()))


def adasum_pair(a, b):
    """(1 - a.b / 2|a|^2) a + (1 - a.b / 2|b|^2) b; a coefficient is 1 below sqrt(DBL_MIN)."""
    dot, aa, bb = float(a @ b), float(a @ a), float(b @ b)
    tiny = math.sqrt(2.2250738585072014e-308)
    ca = 1 - dot / (2 * aa) if aa >= tiny else 1.0
    cb = 1 - dot / (2 * bb) if bb >= tiny else 1.0
    return ca * a + cb * b


def adasum_reference(inputs):
    """The binary tree of ranks, lower rank on the left: (0,1), (2,3), ...; then those."""
    v = [x.double().reshape(-1) for x in inputs]
    d = 1
    while d < len(v):
        for r in range(0, len(v), 2 * d):
            v[r] = adasum_pair(v[r], v[r + d])
        d *= 2
    return v[0].reshape(inputs[0].shape)
